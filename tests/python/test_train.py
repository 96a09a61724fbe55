"""weft.train, weft.nn, checkpoints from sessions, traces and weft.cluster,
checked against the weft CLI run on the same files (an independent path:
`weft train` on the sample .wgt, `weft run --checkpoint`, `weft serve`)."""

import json
import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import weft
from weft import nn, ops

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE_MLP = os.path.join(REPO, "configs", "models", "fashion_mlp.wgt")
DATA = "/usr/share/datasets/fashion-mnist/"


def training_config(**training):
    """The sample MLP's config (configs/fashion_mlp.toml) as a dict, a
    progress record every step."""
    t = {"batch_size": 128, "epochs": 1, "seed": 1, "log_every": 1, "eval_every": 0}
    t.update(training)
    return {
        "model": {"loss": "loss", "images": "images", "labels": "labels", "accuracy": "accuracy", "init": "init"},
        "data": {"format": "idx", "train_images": DATA + "train-images-idx3-ubyte.gz",
                 "train_labels": DATA + "train-labels-idx1-ubyte.gz",
                 "test_images": DATA + "t10k-images-idx3-ubyte.gz",
                 "test_labels": DATA + "t10k-labels-idx1-ubyte.gz",
                 "scale": 1 / 255, "shuffle": True},
        "training": t,
        "optimizer": {"name": "adam", "learning_rate": 0.001},
    }


def write_toml(path, config):
    from weft.session import _toml
    with open(path, "w") as f:
        f.write(_toml(config) + "\n")
    return str(path)


def python_mlp():
    """configs/models/fashion_mlp.wgt (dense 512 ReLU, dense 512 ReLU,
    dense 10, Glorot-uniform kernels) built with weft.nn."""
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (None, 784), name="images")
        y = weft.placeholder("i64", (None,), name="labels")
        h = nn.dense(x, 512, ops.relu, name="dense1")
        h = nn.dense(h, 512, ops.relu, name="dense2")
        logits = nn.dense(h, 10, name="dense3")
        ops.identity(logits, name="logits")
        nn.softmax_cross_entropy(logits, y, name="loss")
        nn.accuracy(logits, y, name="accuracy")
        weft.global_variables_initializer()
    return g


def test_the_mlp_built_in_python_trains_as_the_sample_wgt_step_by_step(tmp_path, weft_cli):
    steps = 25
    config = training_config(metrics=str(tmp_path / "cli.jsonl"))
    cli = subprocess.run([weft_cli, "train", SAMPLE_MLP, "--config", write_toml(tmp_path / "c.toml", config),
                          "--steps", str(steps)], capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    with open(tmp_path / "cli.jsonl") as f:
        expected = [json.loads(line) for line in f]
    records = []
    del config["training"]["metrics"]
    result = weft.train(python_mlp(), config, steps=steps, callback=records.append)
    progress = [r for r in records if "loss" in r and "final" not in r]
    want = [r for r in expected if "loss" in r and "final" not in r]
    assert [r["step"] for r in progress] == list(range(1, steps + 1))
    # The same numbers, bitwise: the same graph, data order and optimizer.
    assert [r["loss"] for r in progress] == [r["loss"] for r in want]
    assert [r["accuracy"] for r in progress] == [r["accuracy"] for r in want]
    assert progress[-1]["loss"] < progress[0]["loss"] * 0.5
    evaluation = [r for r in records if "test_loss" in r and "final" not in r]
    want_eval = [r for r in expected if "test_loss" in r and "final" not in r]
    assert evaluation[0]["test_accuracy"] == want_eval[0]["test_accuracy"]
    assert result["step"] == steps
    assert result["test_accuracy"] == want_eval[0]["test_accuracy"]
    assert result["loss"] == want[-1]["loss"]
    assert any(r.get("note", "").startswith("training <weft.Graph>: 25 steps") for r in records), records[:2]
    assert records[-1]["final"] is True


def test_train_prints_progress_without_a_callback_and_takes_a_path(tmp_path, capsys):
    result = weft.train(SAMPLE_MLP, write_toml(tmp_path / "c.toml", training_config(log_every=5)), steps=10)
    out = capsys.readouterr().out
    assert "step 5  loss " in out and "step 10  loss " in out, out
    assert "eval at step 10: test_loss " in out, out
    assert "final: step=10 loss=" in out, out
    assert result["step"] == 10 and 0 < result["test_accuracy"] <= 1


def test_a_callback_that_raises_stops_the_run_and_its_exception_comes_out(tmp_path):
    seen = []

    def callback(record):
        seen.append(record)
        if record.get("step") == 3 and "loss" in record:
            raise ValueError("enough")

    config = training_config(metrics=str(tmp_path / "m.jsonl"))
    with pytest.raises(ValueError, match="enough"):
        weft.train(python_mlp(), config, steps=400, callback=callback)
    assert [r["step"] for r in seen if "loss" in r] == [1, 2, 3]  # nothing reaches it after it raised
    # The run itself stopped there (its metrics file, written apart from
    # the callback, says so): at most the step under way finished.
    with open(tmp_path / "m.jsonl") as f:
        steps = [json.loads(line)["step"] for line in f if '"loss"' in line]
    assert 3 <= max(steps) <= 4, steps


def test_ctrl_c_stops_training_saves_a_checkpoint_and_resume_continues(tmp_path):
    """SIGINT while a step runs in C++ (no Python callback to notice it):
    the module's watcher stops the run at the next step boundary."""
    metrics = tmp_path / "m.jsonl"
    config = training_config(metrics=str(metrics))
    config["checkpoint"] = {"dir": str(tmp_path / "ckpt"), "every_steps": 100000}
    started, done = time.monotonic(), threading.Event()

    def interrupt_once_it_trains():
        # Reading Fashion-MNIST takes a second, several under ASan on a busy
        # machine: SIGINT goes once the metrics file shows a step (at most
        # 50 s on), while the run trains for seconds more (20,000 steps).
        deadline = time.monotonic() + 50
        while time.monotonic() < deadline and not done.is_set():
            if metrics.exists() and '"loss"' in metrics.read_text():
                break
            time.sleep(0.05)
        time.sleep(0.2)
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGINT)
    interrupter = threading.Thread(target=interrupt_once_it_trains)
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            weft.train(python_mlp(), config, steps=20000, verbose=False)
    finally:
        done.set()
        interrupter.join()
    assert time.monotonic() - started < 60
    saved = sorted(int(n.split("-")[1].split(".")[0]) for n in os.listdir(tmp_path / "ckpt") if n.endswith(".index"))
    assert saved and 0 < saved[-1] < 20000, saved
    stopped_at = saved[-1]
    del config["training"]["metrics"]
    config["training"]["log_every"] = 1000
    steps = []
    result = weft.train(python_mlp(), config, steps=stopped_at + 3, resume=True, verbose=False,
                        callback=lambda r: steps.append(r["step"]) if "loss" in r and "final" not in r else None)
    assert result["step"] == stopped_at + 3
    assert steps == [stopped_at + 3], steps  # log_every: the last step is always reported


def test_ctrl_c_seen_by_a_callback_says_where_the_run_stopped(tmp_path):
    """SIGINT raised while the callback runs Python: the run stops at the
    next step boundary, saves its checkpoint, and KeyboardInterrupt comes
    out of weft.train saying where it stopped and what it saved."""
    config = training_config(log_every=1)
    config["checkpoint"] = {"dir": str(tmp_path / "ckpt"), "every_steps": 100000}
    records = []

    def interrupt_at_step_4(record):
        records.append(record)
        if record.get("step") == 4 and "loss" in record:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt, match=r"stopped by SIGINT at step [45] of 400; saved .*ckpt-[45]: "
                                                r"resume=True continues from it"):
        weft.train(python_mlp(), config, steps=400, callback=interrupt_at_step_4)
    steps = [r["step"] for r in records if "loss" in r and "final" not in r]
    assert 4 <= steps[-1] <= 5, steps
    assert any(n.startswith("ckpt-") and n.endswith(".index") for n in os.listdir(tmp_path / "ckpt"))


def test_train_trace_and_profile(tmp_path):
    result = weft.train(python_mlp(), training_config(), steps=4, verbose=False, trace=tmp_path / "t.json",
                        trace_steps=(2, 3), profile_steps=(2, 4))
    with open(tmp_path / "t.json") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any("MatMul" in str(e.get("name", "")) for e in events), events[:5]
    assert "compute" in result["profile"], result["profile"]


def test_train_errors_name_what_is_wrong(tmp_path):
    g = python_mlp()
    with pytest.raises(weft.InvalidArgumentError, match="weft.train needs a training config"):
        weft.train(g, None)
    with pytest.raises(weft.InvalidArgumentError, match="model is a int; give a weft.Graph"):
        weft.train(3, training_config())
    with pytest.raises(weft.InvalidArgumentError, match="steps must be a positive int"):
        weft.train(g, training_config(), steps=0)
    with pytest.raises(weft.InvalidArgumentError, match="callback is a str, not a function"):
        weft.train(g, training_config(), callback="print")
    with pytest.raises(weft.InvalidArgumentError, match=r"trace_steps: \(3, 2\) is not a range of steps"):
        weft.train(g, training_config(), steps=2, trace=tmp_path / "t.json", trace_steps=(3, 2))
    with pytest.raises(weft.InvalidArgumentError, match="profile_steps: give a step"):
        weft.train(g, training_config(), steps=2, profile_steps="all")
    bad = training_config()
    bad["model"]["loss"] = "lost"
    with pytest.raises(weft.NotFoundError, match=r'<weft.Graph>: the loss \(set by \[model\] loss = "lost"\): '
                       r'the graph has no node "lost"; did you mean "loss"\?'):
        weft.train(g, bad, steps=1, verbose=False)
    with pytest.raises(weft.NotFoundError, match="no_such.wgt"):
        weft.train(str(tmp_path / "no_such.wgt"), training_config(), steps=1, verbose=False)
    with pytest.raises(weft.InvalidArgumentError, match="job"):
        weft.train(g, training_config(), steps=1, job="worker", task=0)


# --- Checkpoints from sessions --------------------------------------------------------


def test_a_checkpoint_of_weft_train_restores_into_a_session_as_weft_run_reads_it(tmp_path, weft_cli):
    config = training_config()
    config["checkpoint"] = {"dir": str(tmp_path / "ckpt"), "every_steps": 1000}
    weft.train(SAMPLE_MLP, config, steps=15, verbose=False)
    images = np.load(os.path.join(REPO, "configs", "models", "sample_digits_784.npy"))
    np.save(tmp_path / "images.npy", images)
    cli = subprocess.run([weft_cli, "run", SAMPLE_MLP, "--checkpoint", str(tmp_path / "ckpt"), "--feed",
                          "images=%s" % (tmp_path / "images.npy"), "--fetch", "logits", "--out", str(tmp_path),
                          "-q"], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    expected = np.load(tmp_path / "logits.npy")
    for graph in (weft.load(SAMPLE_MLP), python_mlp()):
        with weft.Session(graph) as sess:
            prefix = sess.restore(tmp_path / "ckpt")  # the directory: its newest checkpoint
            assert os.path.basename(prefix).startswith("ckpt-"), prefix
            got = sess.run("logits", {"images": images})
        np.testing.assert_array_equal(got, expected)


def test_save_then_restore_gives_the_values_back(tmp_path):
    g = weft.Graph()
    with g.as_default():
        w = weft.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
        n = weft.Variable(np.int64(7), name="n")
        init = weft.global_variables_initializer()
        step = w.assign_add(np.ones((2, 3), np.float32))
    with weft.Session(g) as sess:
        with pytest.raises(weft.FailedPreconditionError, match='save: variable "w" has no value yet'):
            sess.save(tmp_path / "early")
        sess.run(init)
        sess.run(step)
        assert sess.save(tmp_path / "deep" / "dir" / "model") == str(tmp_path / "deep" / "dir" / "model")
    assert os.path.exists(tmp_path / "deep" / "dir" / "model.index")
    with weft.Session(g) as sess:
        sess.restore(tmp_path / "deep" / "dir" / "model")  # instead of the initializer
        values = sess.run([w.value(), n.value()])
        np.testing.assert_array_equal(values[0], np.arange(1, 7, dtype=np.float32).reshape(2, 3))
        assert values[1] == 7
        sess.run(step)  # the restored variable updates as any
        np.testing.assert_array_equal(sess.run(w), np.arange(2, 8, dtype=np.float32).reshape(2, 3))


def test_restore_errors_name_the_variable_and_the_checkpoint(tmp_path):
    g = weft.Graph()
    with g.as_default():
        w = weft.Variable(np.zeros((2, 3), np.float32), name="w")
        init = weft.global_variables_initializer()
    with weft.Session(g) as sess:
        sess.run(init)
        sess.save(tmp_path / "m")
    wider = weft.Graph()
    with wider.as_default():
        weft.Variable(np.zeros((3, 3), np.float32), name="w")
    with weft.Session(wider) as sess:
        with pytest.raises(weft.InvalidArgumentError,
                           match=r'restore: variable "w" is f32\[3,3\]; the checkpoint ".*m" holds f32\[2,3\]'):
            sess.restore(tmp_path / "m")
    more = weft.Graph()
    with more.as_default():
        weft.Variable(np.zeros((2, 3), np.float32), name="w")
        weft.Variable(np.zeros(2, np.float32), name="extra")
    with weft.Session(more) as sess:
        with pytest.raises(weft.NotFoundError,
                           match=r'restore: variable "extra" is not in the checkpoint ".*m" \(`weft ckpt inspect'):
            sess.restore(tmp_path / "m")
        with pytest.raises(weft.NotFoundError, match="restore: checkpoint .*nothing not found"):
            sess.restore(tmp_path / "nothing")
        with pytest.raises(weft.InvalidArgumentError, match="a resource .* has no value to fetch"):
            sess.run("w")
    plain = weft.Graph()
    with plain.as_default():
        weft.constant(1.0, name="c")
    with weft.Session(plain) as sess:
        with pytest.raises(weft.InvalidArgumentError, match="save: the session's graph has no variables"):
            sess.save(tmp_path / "none")


def test_session_run_writes_a_trace(tmp_path):
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (2, 2), name="x")
        y = ops.matmul(x, x, name="mm")
    with weft.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: np.eye(2, dtype=np.float32)}, trace=tmp_path / "step.json"),
                                      np.eye(2, dtype=np.float32))
        with pytest.raises(weft.Error, match="trace"):
            sess.run(y, {x: np.eye(2, dtype=np.float32)}, trace=tmp_path / "missing" / "dir" / "t.json")
    with open(tmp_path / "step.json") as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any(e.get("name") == "mm" or "mm" in str(e.get("args", "")) for e in events), events[:5]


def test_variable_from_a_function_is_made_under_its_name():
    g = weft.Graph()
    with g.as_default():
        with weft.name_scope("layer"):
            v = weft.Variable(lambda: nn.glorot_uniform((4, 6)), "f32", (4, 6), name="kernel")
        init = weft.global_variables_initializer()
    assert v.name == "layer/kernel"
    assert "layer/kernel/init/RandomUniform" in g.node_names()
    with weft.Session(g) as sess:
        sess.run(init)
        value = sess.run(v)
    limit = math.sqrt(6 / 10)
    assert value.shape == (4, 6) and np.all(np.abs(value) <= limit) and np.std(value) > 0.1
    with pytest.raises(weft.InvalidArgumentError, match="needs dtype and shape"):
        weft.Variable(lambda: nn.glorot_uniform((4, 6)), name="k", graph=g)
    with pytest.raises(weft.InvalidArgumentError, match="returned a int, not a weft.Tensor"):
        weft.Variable(lambda: 3, "f32", (), name="k", graph=g)
    with g.as_default():
        x = weft.placeholder("f32", None, name="anything")
        with pytest.raises(weft.InvalidArgumentError, match="a \\[batch, n\\] input with n known is needed"):
            nn.dense(x, 3)
        with pytest.raises(weft.InvalidArgumentError, match="units must be a positive int"):
            nn.dense(x, 0)


# --- Clusters -------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Task:
    """`weft serve` of one task, on loopback, until stop()."""

    def __init__(self, weft_cli, config, job, task):
        env = dict(os.environ, WEFT_PLUGIN_PATH="")
        self.proc = subprocess.Popen([weft_cli, "serve", "--config", config, "--job", job, "--task", str(task)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        deadline = time.monotonic() + 60
        self.output = ""
        while "listening on" not in self.output:
            left = deadline - time.monotonic()
            ready = select.select([self.proc.stdout], [], [], max(left, 0))[0] if left > 0 else []
            line = self.proc.stdout.readline() if ready else ""
            if not line:
                self.stop()
                pytest.fail("weft serve --job %s did not start within 60 s:\n%s" % (job, self.output))
            self.output += line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


def test_cluster_status_sees_a_serving_task_and_one_that_is_down(tmp_path, weft_cli):
    ps_port, worker_port = free_port(), free_port()
    config = {"cluster": {"transport": "tcp", "jobs": {"ps": ["127.0.0.1:%d" % ps_port],
                                                       "worker": ["127.0.0.1:%d" % worker_port]}}}
    path = write_toml(tmp_path / "c.toml", config)
    ps = Task(weft_cli, path, "ps", 0)
    try:
        tasks = {t["task"]: t for t in weft.cluster.status(path, timeout_ms=1500)}
        assert set(tasks) == {"/job:ps/task:0", "/job:worker/task:0"}
        ps_task = tasks["/job:ps/task:0"]
        assert ps_task["answered"] is True, ps_task
        assert ps_task["address"] == "tcp://127.0.0.1:%d" % ps_port
        assert ps_task["state"] == "serving" and "weft serve" in ps_task["role"], ps_task
        assert ps_task["incarnation"] in ps.output
        worker = tasks["/job:worker/task:0"]
        assert worker["answered"] is False
        assert "cannot reach task /job:worker/task:0" in worker["error"], worker
        # The same as `weft cluster status --json` says.
        cli = subprocess.run([weft_cli, "cluster", "status", "--config", path, "--json", "--timeout-ms", "1500"],
                             capture_output=True, text=True, timeout=60)
        by_cli = {t["task"]: t for t in json.loads(cli.stdout)}
        assert set(by_cli["/job:ps/task:0"]) == set(ps_task)
        assert by_cli["/job:ps/task:0"]["incarnation"] == ps_task["incarnation"]
        # A dict config works as well as a path.
        assert len(weft.cluster.status(config, timeout_ms=1500)) == 2
    finally:
        ps.stop()
    with pytest.raises(weft.InvalidArgumentError, match=r"the config has no \[cluster.jobs\]"):
        weft.cluster.status({"runtime": {"inter_op_threads": 1}})
    with pytest.raises(weft.InvalidArgumentError, match="timeout_ms: 0 is not a positive number"):
        weft.cluster.status(path, timeout_ms=0)
    with pytest.raises(weft.InvalidArgumentError, match="give the cluster's config"):
        weft.cluster.status(None)


def test_train_as_a_worker_of_a_cluster_with_a_ps_task(tmp_path, weft_cli):
    ps_port, worker_port = free_port(), free_port()
    config = training_config(log_every=5)
    config["cluster"] = {"transport": "tcp", "jobs": {"ps": ["127.0.0.1:%d" % ps_port],
                                                      "worker": ["127.0.0.1:%d" % worker_port]}}
    path = write_toml(tmp_path / "c.toml", config)
    ps = Task(weft_cli, path, "ps", 0)
    try:
        with pytest.raises(weft.InvalidArgumentError, match='trains as a worker: give job="worker"'):
            weft.train(python_mlp(), path, steps=10, job="ps", task=0, verbose=False)
        records = []
        result = weft.train(python_mlp(), path, steps=10, job="worker", task=0, callback=records.append)
    finally:
        ps.stop()
    assert result["step"] == 10
    assert result["wire_bytes_per_step"] > 0
    assert [r["step"] for r in records if "loss" in r and "final" not in r] == [5, 10]


def test_the_python_page_example_trains_and_evaluates(tmp_path):
    """The example of docs/python.md, "Training", run as it is written."""
    with open(os.path.join(REPO, "docs", "python.md")) as f:
        page = f.read()
    start = page.index("<!-- python example -->\n```python\n") + len("<!-- python example -->\n```python\n")
    code = page[start:page.index("```", start)]
    assert len(code.strip().splitlines()) <= 25
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(weft.__file__))))
    assert run.returncode == 0, run.stderr
    final = [line for line in run.stdout.splitlines() if line.startswith("{'step'")]
    assert final, run.stdout
    weft_accuracy = eval(final[0].replace("nan", "None"))["test_accuracy"]  # the dict it printed
    mine = float(run.stdout.split("test accuracy ")[1].split()[0])
    assert mine > 0.8, run.stdout
    # Weft's evaluation and NumPy's argmax over the restored model agree
    # (batches of different sizes may round a near tie differently: a few
    # of the 10,000 examples at most).
    assert abs(mine - weft_accuracy) <= 5e-4, run.stdout
