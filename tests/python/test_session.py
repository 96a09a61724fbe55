"""weft.Session: NumPy arrays in and out, variables, bad feeds and fetches,
a closed session, and Ctrl-C during a step."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import weft
from weft import ops


def _identity_graph(dtype="f32", shape=(2, 3)):
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder(dtype, shape, name="x")
        ops.identity(x, name="y")
    return g, x


def test_fetch_structures_follow_the_request():
    g = weft.Graph()
    with g.as_default():
        a = weft.constant(np.float32(1), name="a")
        b = weft.constant(np.float32(2), name="b")
    with weft.Session(g) as sess:
        assert sess.run(a) == 1
        assert sess.run([a, "b"]) == [1, 2]
        assert sess.run((a,)) == [1]
        assert sess.run({"first": a, "second": b}) == {"first": 1, "second": 2}


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16", "i8", "i16", "i32", "i64", "u8", "bool"])
def test_every_numpy_dtype_round_trips(dtype):
    np_dtype = {"bool": np.bool_}.get(dtype, np.dtype(
        {"f32": "float32", "f64": "float64", "f16": "float16", "i8": "int8", "i16": "int16", "i32": "int32",
         "i64": "int64", "u8": "uint8"}.get(dtype, "float32")))
    value = (np.arange(6) % 2 == 0) if dtype == "bool" else np.arange(6).astype(np_dtype)
    value = value.reshape(2, 3)
    g, x = _identity_graph(dtype)
    with weft.Session(g) as sess:
        got = sess.run("y", {x: value})
    assert got.dtype == value.dtype and np.array_equal(got, value)


def test_strings_and_bf16():
    g, x = _identity_graph("string", (2,))
    with weft.Session(g) as sess:
        got = sess.run("y", {x: np.array(["héllo", "b"], dtype=object)})
    assert list(got) == ["héllo".encode(), b"b"]
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("bf16", (3,), name="x")
        y = ops.cast(x, DstT="f32")
    with weft.Session(g) as sess:
        # f32 values are narrowed (to nearest even); uint16 arrays are bits.
        got = sess.run(y, {x: np.array([1.0, 3.140625, -2.5], np.float32)})
        np.testing.assert_array_equal(got, [1.0, 3.140625, -2.5])
        got = sess.run(y, {x: np.array([0x3F80, 0x4000, 0xC000], np.uint16)})
        np.testing.assert_array_equal(got, [1.0, 2.0, -2.0])


def test_non_contiguous_and_misaligned_arrays_are_copied_correctly():
    g, x = _identity_graph("f32", (2, 3))
    big = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = big[::2, 1::2]
    assert not view.flags.c_contiguous
    raw = np.zeros(6 * 4 + 4, np.uint8)[4:].view(np.float32).reshape(2, 3)  # 4 bytes off
    raw[:] = 7
    with weft.Session(g) as sess:
        np.testing.assert_array_equal(sess.run("y", {x: view}), view)
        np.testing.assert_array_equal(sess.run("y", {x: raw}), raw)


def test_outputs_own_their_memory_or_are_read_only():
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (4,), name="x")
        y = ops.neg(x)
    with weft.Session(g) as sess:
        out = sess.run(y, {x: np.ones(4, np.float32)})
    out[0] = 5  # its own buffer: writable
    assert out.flags.writeable


def test_a_variable_assigned_a_fed_array_never_writes_into_it():
    # A fed array 64-byte aligned is used in place; the variable that takes
    # it must copy before updating, or the caller's array would change.
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (1024,), name="x")
        v = weft.Variable(np.zeros(1024, np.float32), name="v")
        set_v = v.assign(x)
        bump = v.assign_add(np.ones(1024, np.float32))
        read = v.read()
    buf = np.empty(1024 * 4 + 64, np.uint8)
    start = (-buf.ctypes.data) % 64
    fed = buf[start:start + 4096].view(np.float32)
    assert fed.ctypes.data % 64 == 0
    fed[:] = 3
    with weft.Session(g) as sess:
        sess.run(v.initializer)
        sess.run(set_v, {x: fed})
        sess.run(bump)
        sess.run(bump)
        np.testing.assert_array_equal(sess.run(read), np.full(1024, 5, np.float32))
    np.testing.assert_array_equal(fed, np.full(1024, 3, np.float32))


def test_variables_keep_their_value_between_runs():
    g = weft.Graph()
    with g.as_default():
        v = weft.Variable(np.float32(1.0), name="counter")
        step = v.assign_add(np.float32(2.0))
        init = weft.global_variables_initializer()
    with weft.Session(g) as sess:
        assert sess.run(init) is None
        sess.run(step)
        sess.run([step, step])  # one step: a node named twice runs once
        assert sess.run(v.value()) == 5.0
    with weft.Session(g) as sess:
        with pytest.raises(weft.FailedPreconditionError, match="initializer"):
            sess.run(v.value())


def test_bad_feeds_and_fetches_raise_with_weft_messages():
    g, x = _identity_graph("f32", (2, 3))
    with g.as_default():
        z = ops.neg(x, name="z")
    with weft.Session(g) as sess:
        with pytest.raises(weft.InvalidArgumentError, match=r'feed "x".*f64.*f32.*astype'):
            sess.run("y", {x: np.zeros((2, 3))})
        with pytest.raises(weft.InvalidArgumentError, match=r"shape \[3,2\] does not fit.*\[2,3\]"):
            sess.run("y", {x: np.zeros((3, 2), np.float32)})
        with pytest.raises(weft.InvalidArgumentError, match="is a Neg, not a Placeholder"):
            sess.run("y", {z: np.zeros((2, 3), np.float32)})
        with pytest.raises(weft.NotFoundError, match='fetch "nothing"'):
            sess.run("nothing", {x: np.zeros((2, 3), np.float32)})
        with pytest.raises(weft.InvalidArgumentError, match="object array"):
            sess.run("y", {x: np.array([[object()] * 3] * 2)})
        with pytest.raises(weft.InvalidArgumentError, match="feed_dict key: 3.5 is not a weft.Tensor"):
            sess.run("y", {3.5: np.zeros((2, 3), np.float32)})
        with pytest.raises(weft.InvalidArgumentError, match="fetch: 7 is not a weft.Tensor or a tensor's name"):
            sess.run([7], {x: np.zeros((2, 3), np.float32)})
        with pytest.raises(weft.InvalidArgumentError, match="feed_dict is a list; give a dict"):
            sess.run("y", [(x, np.zeros((2, 3), np.float32))])
        with pytest.raises(weft.InvalidArgumentError, match=r'feed "x": a big-endian array \(>f4\); convert it'):
            sess.run("y", {x: np.ones((2, 3), ">f4")})
        # Any mapping feeds, not only a dict.
        import types
        np.testing.assert_array_equal(sess.run("y", types.MappingProxyType({x: np.ones((2, 3), np.float32)})),
                                      np.ones((2, 3)))
        with pytest.raises(weft.InvalidArgumentError, match="x"):
            sess.run("y")  # x is needed and not fed
        # The session is still fine after all that.
        np.testing.assert_array_equal(sess.run("y", {x: np.ones((2, 3), np.float32)}), np.ones((2, 3)))


def test_a_node_added_after_the_session_is_named_as_such():
    g, x = _identity_graph()
    sess = weft.Session(g)
    with g.as_default():
        late = ops.neg(x, name="late")
    with pytest.raises(weft.NotFoundError, match="added to the graph after this session was made"):
        sess.run(late, {x: np.zeros((2, 3), np.float32)})
    sess.close()


def test_a_closed_session_refuses_to_run():
    g, x = _identity_graph()
    sess = weft.Session(g)
    sess.close()
    assert sess.closed
    with pytest.raises(weft.FailedPreconditionError, match="closed"):
        sess.run("y", {x: np.zeros((2, 3), np.float32)})
    sess.close()  # twice is fine


def test_config_as_dict_path_and_bad_value(tmp_path):
    g, x = _identity_graph()
    with weft.Session(g, config={"runtime": {"inter_op_threads": 2}}) as sess:
        sess.run("y", {x: np.zeros((2, 3), np.float32)})
    path = tmp_path / "c.toml"
    path.write_text("[runtime]\ninter_op_threads = 1\n")
    with weft.Session(g, config=path) as sess:
        sess.run("y", {x: np.zeros((2, 3), np.float32)})
    with pytest.raises(weft.Error, match="nope"):
        weft.Session(g, config={"runtime": {"nope": 1}})
    with pytest.raises(weft.Error, match="missing.toml"):
        weft.Session(g, config=tmp_path / "missing.toml")


def test_ctrl_c_cancels_the_step_and_the_session_goes_on():
    g = weft.Graph()
    with g.as_default():
        n = weft.placeholder("i64", (), name="n")
        i, = weft.while_loop(lambda i: i < n, lambda i: (i + 1,), [weft.constant(0, "i64")])
    with weft.Session(g) as sess:
        assert sess.run(i, {n: 5}) == 5
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            sess.run(i, {n: 10 ** 12})  # hours of iterations
        timer.join()
        assert time.monotonic() - started < 60
        assert sess.run(i, {n: 7}) == 7
