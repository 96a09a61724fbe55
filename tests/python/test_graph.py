"""weft.Graph, weft.ops and friends: graphs built in Python, checked as
they are built, run against NumPy's results."""

import numpy as np
import pytest

import weft
from weft import ops


def test_version_is_the_cores(weft_cli):
    import subprocess
    out = subprocess.run([weft_cli, "version"], capture_output=True, text=True, check=True).stdout
    assert weft.__version__ in out


def test_every_registered_op_is_a_function_with_its_signature():
    names = [n for n in ops.__all__ if n not in ("op", "snake_case")]
    assert len(names) > 170
    assert ops.matmul.__doc__.startswith("MatMul(")
    assert ops.conv2d.__doc__.startswith("Conv2D(")
    assert ops.snake_case("Conv2DBackpropInput") == "conv2d_backprop_input"
    assert ops.snake_case("BatchMatMul") == "batch_matmul"


def test_an_mlp_layer_matches_numpy():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    x_val = rng.standard_normal((5, 3)).astype(np.float32)
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (None, 3), name="x")
        y = ops.relu(ops.bias_add(ops.matmul(x, weft.constant(w)), weft.constant(b)), name="y")
    assert y.dtype == "f32" and y.shape == (None, 4)
    assert y.name == "y" and x.name == "x"
    with weft.Session(g) as sess:
        got = sess.run(y, {x: x_val})
    np.testing.assert_allclose(got, np.maximum(x_val @ w + b, 0), rtol=1e-5, atol=1e-6)


def test_python_numbers_become_constants_of_the_inputs_dtype():
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f64", (2,), name="x")
        y = x * 2 + 1.5
        z = 3 - x
    assert y.dtype == "f64"
    with weft.Session(g) as sess:
        got_y, got_z = sess.run([y, z], {x: np.array([1.0, 2.0])})
    np.testing.assert_array_equal(got_y, [3.5, 5.5])
    np.testing.assert_array_equal(got_z, [2.0, 1.0])


def test_scopes_name_place_and_order_nodes():
    g = weft.Graph()
    with g.as_default():
        a = weft.constant(1.0, name="a")
        with weft.name_scope("dense"):
            m = ops.neg(a)
            with weft.name_scope("inner"):
                n = ops.neg(a)
        with weft.name_scope("dense"):
            k = ops.neg(a)
        with weft.device("/device:CPU:0"):
            d = ops.neg(a, name="on_cpu")
        with weft.control_dependencies([m]):
            c = ops.neg(a, name="after_m")
    assert (m.name, n.name, k.name) == ("dense/Neg", "dense/inner/Neg", "dense_1/Neg")
    text = g.as_text()
    on_cpu = text[text.index('name = "on_cpu"'):]
    assert 'device = "/device:CPU:0"' in on_cpu[:on_cpu.index("attrs")]
    after = text[text.index('name = "after_m"'):]
    assert '"^dense/Neg"' in after[:after.index("attrs")]
    assert d.op == "on_cpu" and c.type == "Neg"


def test_a_mistake_raises_weft_error_and_the_graph_goes_on():
    g = weft.Graph()
    with g.as_default():
        a = weft.placeholder("f32", (2, 3), name="a")
        b = weft.placeholder("f32", (4, 5), name="b")
        with pytest.raises(weft.InvalidArgumentError) as e:
            ops.matmul(a, b, name="bad")
        assert "bad" in str(e.value) and "MatMul" in str(e.value)
        assert isinstance(e.value, ValueError)
        with pytest.raises(weft.InvalidArgumentError, match='has no attr "nope"'):
            ops.matmul(a, a, nope=1)
        with pytest.raises(weft.InvalidArgumentError, match="transpose_a.*expected a bool"):
            ops.matmul(a, a, transpose_a=1)
        with pytest.raises(weft.InvalidArgumentError, match="input 'b' is missing"):
            ops.matmul(a)
        ok = ops.matmul(a, a, transpose_b=True, name="ok")
    assert ok.shape == (2, 2)
    assert "bad" not in g.node_names()
    with pytest.raises(weft.NotFoundError, match="no op 'Frobnicate'"):
        ops.op("Frobnicate", a)


def test_tensors_of_two_graphs_do_not_mix():
    g1, g2 = weft.Graph(), weft.Graph()
    with g1.as_default():
        a = weft.constant(1.0)
    with g2.as_default():
        b = weft.constant(2.0)
    with pytest.raises(weft.InvalidArgumentError, match="belongs to another graph"):
        ops.add(a, b)


def test_get_tensor_finds_by_name_and_guesses():
    g = weft.Graph()
    with g.as_default():
        weft.placeholder("f32", (1,), name="input")
    assert g.get_tensor("input").name == "input"
    assert g.get_tensor("input:0").dtype == "f32"
    with pytest.raises(weft.NotFoundError):
        g.get_tensor("inptu")


def test_cond_takes_the_branch_the_predicate_picks():
    g = weft.Graph()
    with g.as_default():
        p = weft.placeholder("bool", (), name="p")
        x = weft.placeholder("f32", (3,), name="x")
        y = weft.cond(p, lambda: x * 2.0, lambda: ops.neg(x))
    v = np.array([1, 2, 3], np.float32)
    with weft.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {p: True, x: v}), v * 2)
        np.testing.assert_array_equal(sess.run(y, {p: False, x: v}), -v)


def test_a_python_error_inside_a_branch_propagates():
    g = weft.Graph()
    with g.as_default():
        p = weft.placeholder("bool", (), name="p")

        def broken():
            raise ZeroDivisionError("in the branch")

        with pytest.raises(ZeroDivisionError, match="in the branch"):
            weft.cond(p, broken, lambda: weft.constant(1.0))
        weft.constant(2.0, name="still_fine")


def test_while_loop_sums_like_python():
    g = weft.Graph()
    with g.as_default():
        n = weft.placeholder("i64", (), name="n")
        i, total = weft.while_loop(lambda i, t: i < n, lambda i, t: (i + 1, t + i),
                                   [weft.constant(0, "i64"), weft.constant(0, "i64")])
    with weft.Session(g) as sess:
        got_i, got_total = sess.run([i, total], {n: 10})
    assert got_i == 10 and got_total == sum(range(10))


def test_gradients_of_a_square_and_a_matmul():
    rng = np.random.default_rng(2)
    xv = rng.standard_normal((2, 3)).astype(np.float32)
    wv = rng.standard_normal((3, 2)).astype(np.float32)
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (2, 3), name="x")
        w = weft.constant(wv, name="w")
        loss = ops.sum(ops.matmul(x, w) * ops.matmul(x, w), axis=[0, 1])
        dx, dw = weft.gradients(loss, [x, w])
    with weft.Session(g) as sess:
        got_dx, got_dw = sess.run([dx, dw], {x: xv})
    y = xv @ wv
    np.testing.assert_allclose(got_dx, 2 * y @ wv.T, rtol=1e-5)
    np.testing.assert_allclose(got_dw, 2 * xv.T @ y, rtol=1e-5)


def test_a_graph_round_trips_through_wg_and_wgt(tmp_path):
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (None, 2), name="x")
        ops.tanh(ops.matmul(x, weft.constant(np.array([[1, 2], [3, 4]], np.float32))), name="y")
    xv = np.array([[0.1, -0.2], [0.3, 0.4]], np.float32)
    with weft.Session(g) as sess:
        want = sess.run("y", {"x": xv})
    for ext in ("wg", "wgt"):
        path = tmp_path / ("g." + ext)
        g.save(path.as_posix())
        back = weft.load(path)
        assert back.node_names() == g.node_names()
        with weft.Session(back) as sess:
            got = sess.run("y", {"x": xv})
        assert got.tobytes() == want.tobytes()


def test_results_equal_weft_run_bitwise(tmp_path, weft_cli):
    import subprocess
    rng = np.random.default_rng(3)
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (4, 8), name="x")
        w = weft.constant(rng.standard_normal((8, 5)).astype(np.float32), name="w")
        ops.softmax(ops.matmul(x, w), name="probs")
    g.save((tmp_path / "g.wg").as_posix())
    xv = rng.standard_normal((4, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", xv)
    subprocess.run([weft_cli, "run", str(tmp_path / "g.wg"), "--feed", "x=" + str(tmp_path / "x.npy"),
                    "--fetch", "probs", "--out", str(tmp_path), "-q"], check=True)
    from_cli = np.load(tmp_path / "probs.npy")
    with weft.Session(g) as sess:
        from_python = sess.run("probs", {"x": xv})
    assert from_python.dtype == from_cli.dtype and from_python.tobytes() == from_cli.tobytes()


def test_an_onnx_model_imports_and_runs(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper, TensorProto
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
        [numpy_helper.from_array(w, "w")]), opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path.as_posix())
    xv = np.array([[1, -2, 3], [-1, -1, -1]], np.float32)
    g = weft.import_onnx(path)
    assert len(g.onnx_inputs) == 1 and len(g.onnx_outputs) == 1
    with weft.Session(g) as sess:
        got = sess.run(g.onnx_outputs[0], {g.onnx_inputs[0]: xv})
    np.testing.assert_array_equal(got, np.maximum(xv @ w, 0))
    sess = weft.InferenceSession(path)
    inputs = sess.get_inputs()
    assert inputs[0].name == "x" and inputs[0].type == "tensor(float)" and inputs[0].shape == [None, 3]
    assert sess.get_outputs()[0].name == "y"
    got, = sess.run(None, {"x": xv})
    np.testing.assert_array_equal(got, np.maximum(xv @ w, 0))
    with pytest.raises(weft.InvalidArgumentError, match='has no input "z"'):
        sess.run(None, {"z": xv})


def test_get_tensor_finds_a_node_without_outputs():
    g = weft.Graph()
    with g.as_default():
        noop = ops.no_op(name="nothing")
    assert noop.index == -1 and noop.dtype is None and noop.shape is None
    assert g.get_tensor("nothing").index == -1
    assert "node 'nothing' (NoOp)" in repr(g.get_tensor("nothing"))


def test_the_default_graph_and_its_reset():
    weft.reset_default_graph()
    first = weft.get_default_graph()
    assert first is weft.get_default_graph()
    c = weft.constant(1.0, name="c")  # no graph given: the default one
    assert c.graph is first and first.num_nodes == 1
    g = weft.Graph()
    with g.as_default():
        assert weft.get_default_graph() is g
        with pytest.raises(weft.InvalidArgumentError, match="called inside a graph's as_default"):
            weft.reset_default_graph()
    assert weft.get_default_graph() is first
    weft.reset_default_graph()
    assert weft.get_default_graph() is not first and weft.get_default_graph().num_nodes == 0


def test_variable_updates_and_reads():
    g = weft.Graph()
    with g.as_default():
        v = weft.Variable(np.array([10, 20], np.int64), name="v")
        init = weft.global_variables_initializer()
        sub = v.assign_sub([1, 2])
        add = v.assign_add(np.array([5, 5], np.int64))
        with weft.control_dependencies([sub]):
            after = v.read(name="after_sub")
        put = v.assign([0, 0])
    assert repr(v) == "<weft.Variable 'v' i64[2]>"
    with weft.Session(g) as sess:
        sess.run(init)
        np.testing.assert_array_equal(sess.run(after), [9, 18])
        sess.run(add)
        np.testing.assert_array_equal(sess.run(v), [14, 23])
        sess.run(put)
        np.testing.assert_array_equal(sess.run(v), [0, 0])
    with pytest.raises(weft.InvalidArgumentError, match="AssignSub of v: the array is f64, i64 is wanted"):
        v.assign_sub(np.array([1.5, 2.5], np.float64))
