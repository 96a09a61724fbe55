#!/usr/bin/env python3
"""End-to-end tests of `weft model-server` (docs/serving.md): server processes on 127.0.0.1 serving ONNX and .wg
models built here with onnx.helper, driven by http.client (and raw sockets for what HTTP clients cannot send).
Expected values come from NumPy, and from `weft run` bit for bit; never from the server.

    model_server_test.py WEFT_CLI [-k NAME] [--long]

-k runs the tests whose name contains NAME; --long overloads for 20 s instead of 4, then soaks for 5 minutes.
"""
import argparse
import collections
import errno
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import numpy as np

from serving_models import (SLOW_WIDTH, affine_ref, multi_ref, randn, slow_ref, write_affine, write_counter,
                            write_multi, write_slow)

HOST = "127.0.0.1"


def write_text(path, text, mode="w"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(text)


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def assert_close(got, ref, scale, tol, what):
    got = np.asarray(got, np.float64)
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    err = np.abs(got - ref) / (np.asarray(scale) + 1e-30)
    assert np.all(err <= tol), f"{what}: relative error {err.max():.3g}"


def bits_equal(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


class Server:
    """One `weft model-server` process; its stdout and stderr go to files. It must say it listens on
    |scheme|://; self.summary is what that line says is loaded."""

    def __init__(self, env, name, models, config=None, scheme="http"):
        self.name = name
        self.out_path = os.path.join(env.work, name + ".stdout")
        self.err_path = os.path.join(env.work, name + ".stderr")
        args = [env.cli, "model-server", "--models", models, "--http-port", "0", "--host", HOST,
                "--poll-interval", "0.2"]
        if config:
            args += ["--config", config]
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        env.servers.append(self)
        deadline = time.time() + 120
        while not (m := re.search(r"model-server: listening on (\w+)://([\d.]+):(\d+) \((.*)\)", self.stdout())):
            assert self.proc.poll() is None, f"{name} exited {self.proc.returncode}:\n{self.stderr()[-2000:]}"
            assert time.time() < deadline, f"{name}: no 'listening' line within 120 s:\n{self.stderr()[-2000:]}"
            time.sleep(0.05)
        assert m.group(1) == scheme, f"{name}: expected 'listening on {scheme}://', got {m.group(0)!r}"
        self.port, self.summary = int(m.group(3)), m.group(4)

    def stdout(self):
        return read_text(self.out_path)

    def stderr(self):
        return read_text(self.err_path)

    def rss_mb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) / 1024

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


class Env:
    """The test run: its temp dir, the CLI, and the servers (started lazily, all killed at the end)."""

    def __init__(self, cli, long_run):
        self.cli, self.long = cli, long_run
        with open(cli, "rb") as f:  # ASan's quarantine keeps freed memory: then RSS growth says little
            self.asan = b"__asan_init" in f.read()
        self.work = tempfile.mkdtemp(prefix="model_server_test_")
        self.servers = []
        self._main = self._aux = None

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def close(self, keep):
        for s in self.servers:
            s.kill()
        if keep:
            print(f"kept {self.work} (server logs: *.stderr)")
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def main(self):
        """The server of most tests: several models; [serving] max_body_mb = 1."""
        if self._main is None:
            d = self.path("main")
            for name, write in (("affine", write_affine), ("batched", write_affine), ("multi", write_multi),
                                ("counter", write_counter), ("slow", write_slow), ("slow_q", write_slow)):
                write(os.path.join(d, name, "1", "model.onnx"))
            for name, text in (("batched", "max_batch_size = 8\nbatch_timeout_us = 20000"),
                               ("slow", "max_batch_size = 1\nmax_enqueued_batches = 2\nnum_batch_threads = 1"),
                               ("slow_q", "max_batch_size = 1\nmax_enqueued_batches = 1000\nnum_batch_threads = 1")):
                write_text(os.path.join(d, name, "config.toml"), f"[batching]\n{text}\n")
            os.makedirs(os.path.join(d, "affine_wg", "1"))
            run = subprocess.run([self.cli, "import", "--freeze", os.path.join(d, "affine", "1", "model.onnx"), "-o",
                                  os.path.join(d, "affine_wg", "1", "model.wg")], capture_output=True, text=True,
                                 timeout=120)
            assert run.returncode == 0, f"weft import: {run.stderr}"
            write_text(self.path("main.toml"), "[serving]\nmax_body_mb = 1\n")
            self._main = Server(self, "main", d, self.path("main.toml"))
        return self._main

    def aux(self):
        """A server with a bearer token and read_timeout_ms = 500."""
        if self._aux is None:
            write_affine(self.path("aux", "affine", "1", "model.onnx"))
            write_text(self.path("token.txt"), "s3cret-token\n")
            write_text(self.path("aux.toml"), '[serving]\nbearer_token_file = "token.txt"\nread_timeout_ms = 500\n')
            self._aux = Server(self, "aux", self.path("aux"), self.path("aux.toml"))
        return self._aux


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def error(self):
        """The JSON error message (asserting the body is {"error": "..."})."""
        assert self.headers.get("content-type", "").startswith("application/json"), self.headers
        msg = self.json().get("error")
        assert isinstance(msg, str) and msg, f"no error message in {self.body[:300]!r}"
        return msg

    def __repr__(self):
        return f"HTTP {self.status} {self.body[:400]!r}"


class Client:
    """A keep-alive connection (reopened after the server closes it)."""

    def __init__(self, port, headers=None, timeout=30):
        self.port, self.extra, self.timeout, self.conn = port, headers or {}, timeout, None

    def call(self, method, path, body=None, headers=None):
        if self.conn is None:
            self.conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
        h = dict(self.extra)
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        try:
            self.conn.request(method, path, body=body, headers=h)
            r = self.conn.getresponse()
            data = r.read()
        except Exception:
            self.close()
            raise
        return Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, data)

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, body, headers=None):
        return self.call("POST", path, body, headers)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def ok(ans):
    """The JSON of a 200 answer."""
    assert ans.status == 200, ans
    return ans.json()


def expect_error(ans, status, *words):
    assert ans.status == status, f"expected {status}, got {ans}"
    msg = ans.error()
    missing = [w for w in words if w not in msg]
    assert not missing, f"HTTP {status} message lacks {missing}: {msg}"
    return msg


def split_binary(ans):
    """A v2 answer with binary outputs: its JSON part, and {name: bytes}."""
    n = int(ans.headers["inference-header-content-length"])
    head, rest, out = json.loads(ans.body[:n]), ans.body[n:], {}
    for o in head["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            out[o["name"]], rest = rest[:size], rest[size:]
    assert rest == b"", f"{len(rest)} bytes left after the binary outputs"
    return head, out


def http_bytes(method, path, body=b"", headers=()):
    if isinstance(path, str):
        path = path.encode()
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    lines = [method.encode() + b" " + path + b" HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [h if isinstance(h, bytes) else h.encode() for h in headers]
    if method == "POST" and not any(h.lower().startswith(b"content-length") for h in lines[2:]):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class RawConn:
    """A socket that reads HTTP/1.1 answers with Content-Length."""

    def __init__(self, port, timeout=5):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buf, self.closed = b"", False

    def _fill(self):
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            chunk = b""
        if not chunk:
            self.closed = True
        self.buf += chunk
        return bool(chunk)

    def answer(self):
        """(status, headers, body); None when the server closed without answering. A partial answer raises."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                assert not self.buf, f"the connection closed mid-answer: {self.buf[:200]!r}"
                return None
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        length = int(headers.get("content-length", "0"))
        while len(self.buf) < length:
            assert self._fill(), f"the connection closed mid-body ({len(self.buf)} of {length} bytes)"
        body, self.buf = self.buf[:length], self.buf[length:]
        return Answer(status, headers, body)


def parse_metrics(text):
    """Prometheus text: {TYPE name: kind}, {(name, sorted label items): value}."""
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        assert m, f"unparsable metrics line: {line!r}"
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
        samples[(m.group(1), labels)] = float(m.group(3))
    return types, samples


def metrics(client):
    return parse_metrics(client.get("/metrics").body.decode("utf-8"))


def sample(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def start_threads(n, target):
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def join_threads(threads, limit_s):
    deadline = time.time() + limit_s
    for t in threads:
        t.join(timeout=max(0.1, deadline - time.time()))
    assert not any(t.is_alive() for t in threads), f"client threads still running after {limit_s} s"


def test_health(env):
    c = Client(env.main().port)
    assert ok(c.get("/v2/health/live")) == {"live": True} and ok(c.get("/v2/health/ready")) == {"ready": True}
    server = ok(c.get("/v2"))
    assert server["name"] == "weft" and server["version"] and "binary_tensor_data" in server["extensions"], server
    spec = lambda n, t, s: {"name": n, "datatype": t, "shape": s}  # noqa: E731
    for model, inputs, outputs in [
            ("affine", [spec("x", "FP32", [-1, 4])], [spec("y", "FP32", [-1, 3])]),
            ("multi", [spec("a", "FP32", [-1, 3]), spec("b", "FP32", [-1, 3])],
             [spec("s", "FP32", [-1, 3]), spec("p", "FP32", [-1, 2])]),
            ("counter", [spec("x", "INT64", [-1, 2])], [spec("y", "INT64", [-1, 2])])]:
        meta = c.get(f"/v2/models/{model}").json()
        assert meta["name"] == model and meta["versions"] == ["1"], meta
        assert meta["inputs"] == inputs and meta["outputs"] == outputs, meta
        for path in (f"/v2/models/{model}/ready", f"/v2/models/{model}/versions/1/ready"):
            assert ok(c.get(path)) == {"ready": True}, path
    status = c.get("/v1/models/affine").json()
    assert status == {"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                                "status": {"error_code": "OK", "error_message": ""}}]}, status
    assert c.get("/v1/models/affine/versions/1").json() == status
    meta = c.get("/v1/models/affine/metadata").json()
    assert meta["model_spec"]["name"] == "affine" and meta["model_spec"]["version"] == "1", meta
    sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    x, y = sig["inputs"]["x"], sig["outputs"]["y"]
    assert x["dtype"] == "DT_FLOAT" and [d["size"] for d in x["tensor_shape"]["dim"]] == ["-1", "4"], x
    assert y["dtype"] == "DT_FLOAT" and [d["size"] for d in y["tensor_shape"]["dim"]] == ["-1", "3"], y


def weft_run(env, model, feeds, fetches):
    """`weft run MODEL --feed ... --fetch ...`: {fetch: array}."""
    d = tempfile.mkdtemp(dir=env.work)
    args = [env.cli, "run", model, "--out", d, "-q"]
    for name, value in feeds.items():
        np.save(os.path.join(d, name + "_in.npy"), value)
        args += ["--feed", f"{name}={os.path.join(d, name + '_in.npy')}"]
    for f in fetches:
        args += ["--fetch", f]
    run = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"weft run: {run.stderr}"
    return {f: np.load(os.path.join(d, f + ".npy")) for f in fetches}


def test_predict(env):
    c, models = Client(env.main().port), env.path("main")
    x = randn(21, 5, 4)
    ref, scale = affine_ref(x, 1)
    by_run = weft_run(env, os.path.join(models, "affine", "1", "model.onnx"), {"x": x}, ["y"])["y"]
    for model in ("affine", "affine_wg"):
        for path in (f"/v1/models/{model}:predict", f"/v1/models/{model}/versions/1:predict"):
            rows, cols = ok(c.post(path, {"instances": x.tolist()})), ok(c.post(path, {"inputs": x.tolist()}))
            for got in (rows["predictions"], cols["outputs"]):
                assert_close(got, ref, scale, 1e-6, path)
                assert bits_equal(got, by_run), f"{path}: differs from `weft run`: {got} vs {by_run.tolist()}"
    a, b = (randn(s, 3, 3) for s in (22, 23))
    s_ref, p_ref, p_scale = multi_ref(a, b)
    by_run = weft_run(env, os.path.join(models, "multi", "1", "model.onnx"), {"a": a, "b": b}, ["s", "p"])
    preds = ok(c.post("/v1/models/multi:predict", {"instances": [{"a": a[i].tolist(), "b": b[i].tolist()}
                                                                 for i in range(3)]}))["predictions"]
    assert len(preds) == 3 and all(set(p) == {"s", "p"} for p in preds), preds
    outs = ok(c.post("/v1/models/multi/versions/1:predict", {"inputs": {"b": b.tolist(), "a": a.tolist()}}))["outputs"]
    for s_got, p_got in (([p["s"] for p in preds], [p["p"] for p in preds]), (outs["s"], outs["p"])):
        assert_close(s_got, s_ref, np.abs(a) + np.abs(b), 1e-6, "multi s")
        assert_close(p_got, p_ref, p_scale, 1e-6, "multi p")
        assert bits_equal(s_got, by_run["s"]) and bits_equal(p_got, by_run["p"]), "multi: differs from `weft run`"
    xi = np.array([[0, 1], [-5, 10**12], [2**40, -(2**40)]], np.int64)
    assert ok(c.post("/v1/models/counter:predict", {"instances": xi.tolist()}))["predictions"] == (xi * 7 - 3).tolist()


def test_v2_infer(env):
    c, x, answers = Client(env.main().port), randn(31, 5, 4), []
    (ref, scale), inp = affine_ref(x, 1), {"name": "x", "shape": [5, 4], "datatype": "FP32"}
    for data in (x.ravel().tolist(), x.tolist()):
        j = ok(c.post("/v2/models/affine/infer", {"id": "req-7", "inputs": [dict(inp, data=data)]}))
        assert j["id"] == "req-7" and j["model_name"] == "affine" and j["model_version"] == "1", j
        (o,) = j["outputs"]
        assert o["name"] == "y" and o["datatype"] == "FP32" and o["shape"] == [5, 3], o
        answers.append(np.array(o["data"], np.float32).reshape(5, 3))
        assert_close(answers[-1], ref, scale, 1e-6, "v2 JSON")
    head = json.dumps({"inputs": [dict(inp, parameters={"binary_data_size": x.nbytes})]}).encode()
    r = c.post("/v2/models/affine/versions/1/infer", head + x.tobytes(),
               {"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/octet-stream"})
    assert r.status == 200 and "inference-header-content-length" not in r.headers, r
    assert bits_equal(np.array(r.json()["outputs"][0]["data"], np.float32).reshape(5, 3), answers[0])
    r = c.post("/v2/models/affine/infer", {"id": "bin", "inputs": [dict(inp, data=x.ravel().tolist())],
                                           "parameters": {"binary_data_output": True}})
    j, blobs = split_binary(r)
    assert r.status == 200 and j["id"] == "bin" and "data" not in j["outputs"][0], r
    assert j["outputs"][0]["parameters"]["binary_data_size"] == 60, j
    assert bits_equal(np.frombuffer(blobs["y"], "<f4").reshape(5, 3), answers[0]), "binary output differs from JSON"
    a, b = (randn(s, 2, 3) for s in (32, 33))
    s_ref, p_ref, p_scale = multi_ref(a, b)
    body = {"inputs": [{"name": "a", "shape": [2, 3], "datatype": "FP32", "data": a.tolist()},
                       {"name": "b", "shape": [2, 3], "datatype": "FP32", "data": b.ravel().tolist()}],
            "outputs": [{"name": "p", "parameters": {"binary_data": True}}, {"name": "s"}]}
    r = c.post("/v2/models/multi/infer", body)
    j, blobs = split_binary(r)
    assert [o["name"] for o in j["outputs"]] == ["p", "s"] and list(blobs) == ["p"], j
    assert_close(np.frombuffer(blobs["p"], "<f4").reshape(2, 2), p_ref, p_scale, 1e-6, "binary p")
    assert_close(np.array(j["outputs"][1]["data"]).reshape(2, 3), s_ref, np.abs(a) + np.abs(b), 1e-6, "s")
    assert [o["name"] for o in ok(c.post("/v2/models/multi/infer", dict(body, outputs=[{"name": "s"}])))["outputs"]] \
        == ["s"]
    j = ok(c.post("/v2/models/counter/infer", {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "INT64",
                                                           "data": [2**50, -1]}]}))
    assert j["outputs"][0]["data"] == [2**50 * 7 - 3, -10], j


def test_batching(env):
    port = env.main().port
    c, rows_sent, errors = Client(port), [0] * 16, []
    _, before = metrics(c)

    def client(i):
        rng, cl = np.random.default_rng(100 + i), Client(port)
        try:
            for _ in range(20):
                x = rng.standard_normal((int(rng.integers(1, 4)), 4)).astype(np.float32)
                got = ok(cl.post("/v1/models/batched:predict", {"instances": x.tolist()}))["predictions"]
                assert_close(got, *affine_ref(x, 1), 1e-6, "batched answer (rows mixed up?)")
                rows_sent[i] += len(x)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"client {i}: {e!r}")
    join_threads(start_threads(16, client), 60)
    assert not errors, errors[:3]
    _, after = metrics(c)
    labels = {"model": "batched", "version": "1"}
    count = sample(after, "weft_batch_size_count", **labels) - sample(before, "weft_batch_size_count", **labels)
    total = sample(after, "weft_batch_size_sum", **labels) - sample(before, "weft_batch_size_sum", **labels)
    assert count < 320 and total == sum(rows_sent), f"{count} batches of 320 requests, {total} rows of {sum(rows_sent)}"
    x = randn(5, 20, 4)
    got = ok(c.post("/v1/models/batched:predict", {"inputs": x.tolist()}))["outputs"]
    assert_close(got, *affine_ref(x, 1), 1e-6, "20 rows through max_batch_size 8")
    return f"320 requests, {sum(rows_sent)} rows in {count:.0f} batches"


def test_metrics(env):
    c = Client(env.main().port)
    _, before = metrics(c)
    x, sent = [[1.0, 2.0, 3.0, 4.0]], collections.Counter()

    def send(path, body, version="1"):
        sent[("v2" if path.endswith("/infer") else "tfserving", version, str(c.post(path, body).status))] += 1
    for i in range(7):
        send("/v1/models/affine:predict" if i % 2 else "/v1/models/affine/versions/1:predict", {"instances": x})
    for body in ({"instances": [[1, 2]]}, b"{oops", {"inputs": {"nope": x}}):
        send("/v1/models/affine:predict", body)
    for dtype in ["FP32"] * 5 + ["FP64"]:
        send("/v2/models/affine/infer", {"inputs": [{"name": "x", "shape": [1, 4], "datatype": dtype, "data": x[0]}]})
    send("/v2/models/affine/versions/1/infer", {"inputs": 3})
    # Labels come from what is served: an unknown version counts as "_unknown", and so does an unknown model.
    send("/v1/models/affine/versions/9:predict", {"instances": x}, "_unknown")
    for name in ("nobody", "nobody_else"):
        sent[("tfserving", "_unknown", str(c.post(f"/v1/models/{name}:predict", {"instances": x}).status), "_unknown")] += 1
    assert sent == {("tfserving", "1", "200"): 7, ("tfserving", "1", "400"): 3, ("v2", "1", "200"): 5,
                    ("v2", "1", "400"): 2, ("tfserving", "_unknown", "404"): 1,
                    ("tfserving", "_unknown", "404", "_unknown"): 2}, sent
    types, after = metrics(c)
    for key, n in sent.items():
        protocol, version, code = key[:3]
        labels = dict(model=key[3] if len(key) > 3 else "affine", version=version, protocol=protocol, code=code)
        got = sample(after, "weft_requests_total", **labels) - sample(before, "weft_requests_total", **labels)
        assert got == n, f"weft_requests_total{labels}: +{got}, sent {n}"
    for name in ("weft_requests_total", "weft_request_duration_seconds", "weft_batch_size", "weft_queue_depth",
                 "weft_model_versions_loaded"):
        assert name in types, f"no # TYPE for {name}"
    histograms, series = {n for n, k in types.items() if k == "histogram"}, collections.defaultdict(list)
    assert {"weft_request_duration_seconds", "weft_batch_size"} <= histograms, types
    for (n, labels), v in after.items():
        if n.endswith("_bucket") and n[:-7] in histograms:
            series[(n[:-7], tuple(kv for kv in labels if kv[0] != "le"))].append((float(dict(labels)["le"]), v))
    for (name, rest), buckets in series.items():
        counts = [v for _, v in sorted(buckets)]
        assert counts == sorted(counts), f"{name}{dict(rest)}: buckets not cumulative: {counts}"
        assert sorted(buckets)[-1][0] == float("inf") and counts[-1] == after[(name + "_count", rest)], \
            f"{name}{dict(rest)}: +Inf bucket {counts[-1]} != _count"
    for model in ("affine", "multi", "counter", "batched", "affine_wg", "slow"):
        assert sample(after, "weft_model_versions_loaded", model=model) == 1, f"weft_model_versions_loaded {model}"
    stages = {dict(l).get("stage") for n, l in after if n == "weft_request_duration_seconds_count"}
    assert {"queue", "compute", "total"} <= stages, stages


def test_errors(env):
    port = env.main().port
    c, x, row = Client(port), [[1.0, 2.0, 3.0, 4.0]], [1.0, 2.0, 3.0]
    pred, infer, multi = "/v1/models/affine:predict", "/v2/models/affine/infer", "/v1/models/multi:predict"
    v2 = lambda shape, dtype, data: {"inputs": [{"name": "x", "shape": shape, "datatype": dtype, "data": data}]}  # noqa
    for ans, status, words in [
            (c.post(pred, b'{"instances": [[1, 2'), 400, ["malformed JSON"]),
            (c.post("/v1/models/nosuch:predict", {"instances": x}), 404, ['"nosuch"', "affine", "multi", "counter"]),
            (c.post("/v1/models/affine/versions/9:predict", {"instances": x}), 404, ["version 9", "available: 1"]),
            (c.get("/v2/models/affine/versions/9"), 404, ["version 9"]),
            (c.post(multi, {"inputs": {"a": [row]}}), 400, ['missing input "b"', "a FP32 [-1,3]", "b FP32 [-1,3]"]),
            (c.post(multi, {"instances": [{"a": row}]}), 400, ['missing input "b"']),
            (c.post(multi, {"inputs": {"a": [row], "b": [row], "c": [row]}}), 400, ['unknown input "c"', "a FP32"]),
            (c.post(infer, v2([1, 4], "INT64", [1, 2, 3, 4])), 400, ['"x"', "FP32", "INT64"]),
            (c.post(pred, {"instances": [row]}), 400, ['"x"', "[1,3]", "[-1,4]"]),
            (c.post(infer, v2([2, 4], "FP32", [1, 2, 3])), 400, ['"x"', "3 values", "[2,4]"]),
            (c.post(pred, {"instances": [[1, 2, 3, 4], [1, 2]]}), 400, ['"x"', "ragged"]),
            (c.post("/v1/models/counter:predict", {"instances": [[2**63, 1]]}), 400,
             ['"x"', "9223372036854775808", "out of range", "INT64"]),
            (c.post("/v1/models/counter:predict", {"instances": [[1.5, 1]]}), 400, ["expected an integer", "1.5"]),
            (c.get(pred), 405, ["POST"]),
            (c.get("/v3/nothing"), 404, ["no endpoint", "/v3/nothing"]),
            (c.post(pred, {"instances": x}, {"Request-Timeout-Ms": "soon"}), 400, ["Request-Timeout-Ms", "soon"])]:
        expect_error(ans, status, *words)
    assert c.get(pred).headers.get("allow") == "POST"
    head = json.dumps({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 32}}]}).encode()
    data, short = np.arange(8, dtype=np.float32).tobytes(), head.replace(b'_size": 32', b'_size": 28')
    for body, length, words in [(head + data, len(head) + 100, ["Inference-Header-Content-Length"]),
                                (head + data[:28], len(head), ['"x"', "32 bytes", "28 bytes left"]),
                                (short + data[:28], len(short), ['"x"', "binary_data_size is 28", "[2,4]", "32"]),
                                (head + data + b"xx", len(head), ["34 bytes after the JSON part", "add up to 32"])]:
        expect_error(c.post(infer, body, {"Inference-Header-Content-Length": str(length)}), 400, *words)
    assert c.post(pred, {"instances": x}).status == 200, "the connection does not serve after the errors"
    # 413: the answer to the headers alone, then to a client that sends the whole body (as curl does).
    raw = RawConn(port)
    raw.sock.sendall(http_bytes("POST", pred, headers=[f"Content-Length: {2 << 20}"]))
    ans = raw.answer()
    raw.sock.close()
    assert ans is not None, "413: the server closed without answering"
    expect_error(ans, 413, "max_body_mb")
    big = b'{"instances": [' + b"[1.0, 2.0, 3.0, 4.0], " * 100000 + b"[1.0, 2.0, 3.0, 4.0]]}"
    try:
        expect_error(Client(port).post(pred, big), 413, "1 MiB")
    except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as e:
        raise AssertionError(f"a client sending a {len(big) >> 20} MiB body got {e!r}, not the 413 answer") from e


def hostile_cases(rng, n):
    """(kind, mode, bytes): mode "keep" (valid framing, on a keep-alive connection), "fresh" (a connection of its
    own, answer or close) or "drop" (sent, then the connection is closed)."""
    pred, infer = "/v1/models/affine:predict", "/v2/models/affine/infer"
    good = json.dumps({"instances": [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]}).encode()
    good_v2 = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})
    good_v2 = good_v2.encode()
    request_lines = [b"GET\r\n\r\n", b"GET /v2\r\n\r\n", b"GET /v2 HTTP/1.1 extra\r\n\r\n", b"GET /v2 HTTX/1.1\r\n\r\n",
                     b"G\x00T /v2 HTTP/1.1\r\n\r\n", b"GET /v2 HTTP/1.1\r\nBad Header\r\n\r\n",
                     b"GET /v2 HTTP/1.1\r\n: novalue\r\n\r\n", b"POST /v2 HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                     b"POST /v2 HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                     b"POST /v2 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n"]
    cases = []
    for _ in range(n):
        kind, mode = rng.randrange(10), "keep"
        path, body = rng.choice([(pred, good), (infer, good_v2)])
        if kind == 0:  # bad JSON: an unbalanced bracket or a NUL inserted
            at = rng.randrange(len(body))
            data = http_bytes("POST", path, body[:at] + bytes([rng.choice(b"{[]}\x00")]) + body[at:])
        elif kind == 1:  # truncated JSON
            data = http_bytes("POST", path, body[:rng.randrange(len(body))])
        elif kind == 2:  # wrong shapes: row 0 is never 4 wide
            width = rng.choice([0, 1, 3, 5, 100])
            rows = [[1.0] * (width if r == 0 else rng.choice([width, 4])) for r in range(rng.randrange(1, 4))]
            v2 = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [len(rows), 4], "data": rows}]}
            data = http_bytes("POST", *((pred, {"instances": rows}) if rng.random() < 0.5 else (infer, v2)))
        elif kind == 3:  # huge shapes
            inp = {"name": "x", "datatype": "FP32",
                   "shape": rng.choice([[10**12, 4], [2**40, 2**40], [1e12], [2**62, 4], [4, 2**62, 2**62], [-1, 4]])}
            if rng.random() < 0.3:
                inp["parameters"] = {"binary_data_size": rng.choice([16, 2**63 - 1])}
            else:
                inp["data"] = [1, 2, 3, 4]
            data = http_bytes("POST", infer, {"inputs": [inp]})
        elif kind == 4:  # deep nesting
            depth = rng.choice([9, 64, 1100, 5000, 100000])
            inner = b"[" * depth + b"1" + b"]" * depth if rng.random() < 0.5 else b"[" * depth
            data = http_bytes("POST", pred, b'{"instances": ' + inner + b"}")
        elif kind == 5:  # a huge Content-Length, a short body, then close
            mode = "drop"
            data = http_bytes("POST", pred, body[:20], [f"Content-Length: {rng.choice([500000, 10**9, 10**15])}"])
        elif kind == 6:  # invalid request lines
            mode, junk = "fresh", bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 40)))
            data = rng.choice(request_lines + [junk.replace(b"\r\n", b"") + b"\r\n\r\n"])
        elif kind == 7:  # headers over 16 KiB
            mode, data = "fresh", http_bytes("GET", "/v2", headers=["X-Pad: " + "a" * rng.randrange(16500, 24000)])
        elif kind == 8:  # non-UTF-8 bytes in the body, the path or a header
            mode, data = rng.choice([
                ("keep", http_bytes("POST", path, body.replace(b'"x"', b'"\xff\xfe"').replace(b"instances",
                                                                                           b"inst\xc3ances"))),
                ("fresh", http_bytes("POST", b"/v1/models/\xff\xfe\x80:predict", good)),
                ("fresh", http_bytes("POST", pred, good, [b"Request-Timeout-Ms: \xff\xfe"]))])
        else:  # a new model name each time
            data = http_bytes("POST", f"/v1/models/m{rng.getrandbits(48):x}:predict", good)
        cases.append((kind, mode, data))
    return cases


def test_hostile(env):
    server, x = env.main(), [[1.0, 2.0, 3.0, 4.0]]
    c = Client(server.port)
    ok(c.post("/v1/models/affine:predict", {"instances": x}))
    series_before = sum(1 for n, _ in metrics(c)[1] if n == "weft_requests_total")
    rss_before, cases = server.rss_mb(), hostile_cases(random.Random(1234), 10000)
    answered, closed, failures = [0] * 4, [0] * 4, []

    def worker(i):
        conn = None
        for kind, mode, data in cases[i::4]:
            try:
                if conn is None or conn.closed or mode != "keep":
                    conn = RawConn(server.port, timeout=3)
                conn.sock.sendall(data)
                ans = None if mode == "drop" else conn.answer()
                assert ans is not None or mode != "keep", "a well-framed request was not answered"
                if ans is not None:
                    assert 400 <= ans.status < 500, ans
                    ans.error()
                    conn.closed |= ans.headers.get("connection", "").lower() == "close"
                answered[i] += ans is not None
                closed[i] += ans is None
            except Exception as e:  # noqa: BLE001 - reported below
                reset = isinstance(e, (ConnectionResetError, BrokenPipeError))
                closed[i] += reset
                if not reset or mode == "keep":
                    failures.append(f"kind {kind} ({mode}): {e!r}: {data[:120]!r}")
                conn = None
            if conn is not None and (conn.closed or mode != "keep"):
                conn.sock.close()
                conn = None
            if len(failures) > 20:
                return
    join_threads(start_threads(4, worker), 300)
    assert not failures, f"{len(failures)} failures, first: " + "\n  ".join(failures[:5])
    ok(Client(server.port).post("/v1/models/affine:predict", {"instances": x}))  # still serving
    grew = server.rss_mb() - rss_before
    assert grew < 50 or env.asan, f"RSS grew {grew:.0f} MB"
    note = f"{sum(answered)} answered 4xx, {sum(closed)} closed; RSS +{grew:.1f} MB; " + slow_headers(env)
    text, problems = c.get("/metrics").body.decode("utf-8", "replace"), []
    if "\ufffd" in text:
        problems.append("/metrics is not UTF-8 (label values from the URL)")
    series = sum(1 for n, _ in parse_metrics(text)[1] if n == "weft_requests_total") - series_before
    if series > 50:
        problems.append(f"weft_requests_total gained {series} series (one per unknown model name sent)")
    assert not problems, f"{note}; but " + "; ".join(problems)
    return note


def slow_headers(env):
    """[serving] read_timeout_ms = 500: half a request line, then nothing."""
    server, token, body = env.aux(), {"Authorization": "Bearer s3cret-token"}, {"instances": [[1, 2, 3, 4]]}
    times, errors, stop = [], [], threading.Event()

    def others(_):
        while not stop.is_set():
            t0 = time.time()
            try:
                ok(Client(server.port, token, timeout=5).post("/v1/models/affine:predict", body))
                times.append(time.time() - t0)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
            time.sleep(0.05)
    threads = start_threads(1, others)
    try:
        s, t0 = socket.create_connection((HOST, server.port), timeout=5), time.time()
        s.sendall(b"POST /v1/models/aff")
        try:
            got = s.recv(1024)
        except ConnectionResetError:
            got = b""
        took = time.time() - t0
        s.close()
        assert got == b"" and 0.4 <= took <= 3, f"a stalled client: after {took:.1f} s got {got!r}"
    finally:
        stop.set()
        join_threads(threads, 10)
    assert not errors and times and max(times) < 1, f"others meanwhile: {errors[:3]}, max {max(times or [0]):.2f} s"
    return f"a stalled client dropped after {took:.2f} s"


def test_overload(env):
    port = env.main().port
    x = randn(41, 1, SLOW_WIDTH)
    ref, body = slow_ref(x), json.dumps({"instances": x.tolist()}).encode()
    seconds, results, errors = 20 if env.long else 4, [], []
    until = time.time() + seconds

    def client(i):
        cl = Client(port)
        while time.time() < until:
            t0 = time.time()
            try:
                r = cl.post("/v1/models/slow:predict", body, {"Request-Timeout-Ms": "3000"})
                results.append((r, time.time() - t0))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
                return
    join_threads(start_threads(32, client), seconds + 60)
    assert not errors, errors[:3]
    codes = collections.Counter(r.status for r, _ in results)
    assert set(codes) <= {200, 429} and codes.get(429) and codes.get(200), f"answers by status: {codes}"
    for r, took in results:
        if r.status == 429:
            assert r.headers.get("retry-after"), r.headers
            expect_error(r, 429, "queue", "full")
        else:
            assert_close(r.json()["predictions"], ref, np.ones_like(ref), 1e-4, "slow model")
            assert took <= 3.5, f"an accepted request took {took:.2f} s (deadline 3 s)"
    rate = codes[200] / seconds
    # A request with Request-Timeout-Ms: 1 behind a 200-row request (split into 200 runs of one row).
    rows = json.dumps({"instances": [[0] * SLOW_WIDTH] * 200}).encode()
    big = start_threads(1, lambda _: Client(port).post("/v1/models/slow_q:predict", rows))
    time.sleep(0.1)
    late = Client(port).post("/v1/models/slow_q:predict", body, {"Request-Timeout-Ms": "1"})
    join_threads(big, 60)
    expect_error(late, 504, "deadline")
    note = f"{codes[200]} answered 200 ({rate:.0f}/s), {codes[429]} answered 429 in {seconds} s"
    if env.long:
        note += "; " + soak(env, x, ref, rate * 0.8)
    return note


def soak(env, x, ref, rate):
    """5 minutes at |rate| requests/s (8 paced clients) on slow_q: all 200; RSS growth < 5%."""
    server, body = env.main(), json.dumps({"instances": x.tolist()}).encode()
    start, statuses, errors, rss = time.time(), [], [], []

    def client(i):
        cl = Client(server.port)
        for k in range(int(300 * rate / 8)):
            time.sleep(max(0.0, start + (k * 8 + i) / rate - time.time()))
            try:
                r = cl.post("/v1/models/slow_q:predict", body)
                statuses.append(r.status)
                if r.status == 200:
                    assert_close(r.json()["predictions"], ref, np.ones_like(ref), 1e-4, "soak")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
    threads = start_threads(8, client)
    while time.time() < start + 300:
        rss.append(server.rss_mb())
        time.sleep(10)
    join_threads(threads, 60)
    assert not errors and set(statuses) == {200}, f"soak: {collections.Counter(statuses)}, {errors[:3]}"
    growth = (rss[-1] - rss[2]) / rss[2]
    assert growth < 0.05, f"soak: RSS {rss[2]:.1f} MB after 20 s, {rss[-1]:.1f} MB at the end"
    return (f"soak {len(statuses)} requests at {rate:.0f}/s: RSS {rss[2]:.1f} MB at 20 s, {rss[-1]:.1f} MB "
            f"at 300 s ({growth * 100:+.1f}%)")


def test_bearer(env):
    port, x = env.aux().port, np.array([[1, 2, 3, 4]], np.float32)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
        r = Client(port, headers).post("/v1/models/affine:predict", {"instances": x.tolist()})
        expect_error(r, 401, "bearer token", "Authorization")
        assert r.headers.get("www-authenticate") == "Bearer", r.headers
    got = ok(Client(port, {"Authorization": "Bearer s3cret-token"}).post("/v1/models/affine:predict",
                                                                         {"instances": x.tolist()}))["predictions"]
    assert_close(got, *affine_ref(x, 1), 1e-6, "with the token")


def stage(models, model, version, writer):
    """Writes a version beside the model, then renames it into place (what a deployment does)."""
    tmp = os.path.join(models, model, f".staging{version}")
    writer(os.path.join(tmp, "model.onnx"))
    os.rename(tmp, os.path.join(models, model, str(version)))


def test_hot_reload(env):
    models = env.path("reload")
    write_affine(os.path.join(models, "affine", "1", "model.onnx"))
    server = Server(env, "reload", models)
    x = randn(51, 3, 4)
    (ref1, scale), (ref2, _) = affine_ref(x, 1), affine_ref(x, 2)
    seen, failures, stop = [[] for _ in range(4)], [], threading.Event()

    def client(i):
        cl, t_end = Client(server.port), time.time() + 15
        while not stop.is_set() and time.time() < t_end:
            try:
                got = np.asarray(ok(cl.post("/v1/models/affine:predict", {"instances": x.tolist()}))["predictions"])
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append((time.time(), str(e)))
                continue
            which = [v for v, ref in ((1, ref1), (2, ref2)) if np.all(np.abs(got - ref) <= 1e-6 * (scale + 1e-30))]
            seen[i].append(which[0] if which else 0)
    threads, c = start_threads(4, client), Client(server.port)

    def wait_status(pred, what):
        deadline = time.time() + 10
        while time.time() < deadline:
            status = c.get("/v1/models/affine").json()["model_version_status"]
            if pred(status):
                return status
            time.sleep(0.1)
        raise AssertionError(f"within 10 s: {what}; the status: {status}")
    try:
        time.sleep(0.5)
        t_switch = time.time()
        stage(models, "affine", 2, lambda p: write_affine(p, 2))
        wait_status(lambda s: [(v["version"], v["state"]) for v in s] == [("2", "AVAILABLE")], "only version 2")
        switched = time.time() - t_switch
        time.sleep(0.5)
        t_broken = time.time()
        stage(models, "affine", 3, lambda p: write_text(p, b"\x08\x07not a model\xff" * 50, "wb"))
        status = wait_status(lambda s: any(v["version"] == "3" and v["state"] == "END" for v in s), "version 3 END")
        time.sleep(1.0)
        status = c.get("/v1/models/affine").json()["model_version_status"]
    finally:
        stop.set()
        join_threads(threads, 20)
        server.kill()
    v3 = [v for v in status if v["version"] == "3"][0]
    assert v3["status"]["error_code"] != "OK" and "model.onnx" in v3["status"]["error_message"], v3
    assert ("2", "AVAILABLE") in [(v["version"], v["state"]) for v in status], status
    for i, s in enumerate(seen):
        assert 0 not in s, f"client {i}: an answer matching neither version"
        assert s and s[-1] == 2 and s == sorted(s), f"client {i}: versions answered {s}"
    late = [(t - t_broken, f) for t, f in failures if t >= t_broken]
    assert not failures, (f"{len(failures) - len(late)} requests failed around the switch to version 2, "
                          f"{len(late)} after the broken version 3 was staged (from {late[0][0]:+.2f} s to "
                          f"{late[-1][0]:+.2f} s), first: {failures[0][1]}" if late else failures[:3])
    return f"version 2 alone within {switched:.1f} s; {sum(map(len, seen))} requests, all 200"


def test_sigterm(env):
    models = env.path("term")
    write_slow(os.path.join(models, "slow", "1", "model.onnx"))
    write_text(os.path.join(models, "slow", "config.toml"), "[batching]\nmax_batch_size = 4\n")
    server = Server(env, "term", models)
    x = randn(61, 1, SLOW_WIDTH)
    ref, body = slow_ref(x), json.dumps({"instances": x.tolist()}).encode()
    log, refused = [], (ConnectionRefusedError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)

    def client(i):
        cl, t_end = Client(server.port, timeout=40), time.time() + 40
        while time.time() < t_end:
            t0 = time.time()
            try:
                log.append((t0, cl.post("/v1/models/slow:predict", body)))
            except Exception as e:  # noqa: BLE001 - checked below
                log.append((t0, e))
                if isinstance(e, ConnectionRefusedError) or server.proc.poll() is not None:
                    return
    threads = start_threads(8, client)
    time.sleep(1.5)
    t_term = time.time()
    server.proc.send_signal(signal.SIGTERM)
    try:
        rc = server.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        rc = f"none: still running 30 s after SIGTERM; it printed {server.stdout()!r}"
    took = time.time() - t_term
    join_threads(threads, 45)
    assert rc == 0, f"exit {rc} after SIGTERM:\n{server.stderr()[-1500:]}"
    assert "model-server: stopped" in server.stdout(), server.stdout()
    bad = []
    for t0, r in log:
        if isinstance(r, Answer):
            if r.status == 200:
                assert_close(r.json()["predictions"], ref, np.ones_like(ref), 1e-4,
                             f"the answer to a request sent {t0 - t_term:+.3f} s from SIGTERM")
            elif not (r.status == 503 and t0 > t_term - 0.05):
                bad.append(f"{t0 - t_term:+.3f} s: {r}")
        elif t0 < t_term - 0.05 or not isinstance(r, refused):
            bad.append(f"sent at {t0 - t_term:+.3f} s: {r!r}")
    assert not bad, f"{len(bad)} requests without a complete answer, first: {bad[:4]}"
    before = sum(1 for t0, r in log if isinstance(r, Answer) and r.status == 200 and t0 < t_term)
    with socket.socket() as probe:
        probe.settimeout(2)
        assert probe.connect_ex((HOST, server.port)) == errno.ECONNREFUSED, "the port accepts connections after exit"
    return f"exit 0 in {took:.2f} s; {before} answers before SIGTERM, {len(log)} requests"


def test_setup(env):
    run = subprocess.run([env.cli, "model-server", "--models", "/nonexistent/weft_models", "--http-port", "0",
                          "--host", HOST], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "/nonexistent/weft_models" in run.stderr and "not a directory" in run.stderr, \
        f"exit {run.returncode}: {run.stderr}"
    models = env.path("setup")
    write_affine(os.path.join(models, "affine", "1", "model.onnx"))
    write_affine(os.path.join(models, "badcfg", "1", "model.onnx"))
    write_text(os.path.join(models, "badcfg", "config.toml"), "[batching]\nmax_batch_size = 8\nmax_bacth_size = 4\n")
    server = Server(env, "setup", models)
    try:
        log = server.stderr()
        assert re.search(r"badcfg.*config\.toml:3:\d+.*max_bacth_size", log), f"the log does not name file:line:\n{log}"
        c, x = Client(server.port), np.array([[1, 2, 3, 4]], np.float32)
        got = ok(c.post("/v1/models/affine:predict", {"instances": x.tolist()}))["predictions"]
        assert_close(got, *affine_ref(x, 1), 1e-6, "beside a broken config")
        expect_error(c.post("/v1/models/badcfg:predict", {"instances": x.tolist()}), 503, "config.toml:3")
    finally:
        server.kill()


def test_cli_predict(env):
    """`weft predict URL --feed NAME=FILE.npy`: binary and JSON, several inputs, integers, the token, its errors."""
    port, d = env.main().port, tempfile.mkdtemp(dir=env.work)
    url = f"http://127.0.0.1:{port}/v2/models"

    def predict(target, feeds, *extra):
        args = [env.cli, "predict", target, "--out-dir", d, *extra]
        for name, value in feeds.items():
            np.save(os.path.join(d, name + "_in.npy"), value)
            args += ["--feed", f"{name}={os.path.join(d, name + '_in.npy')}"]
        return subprocess.run(args, capture_output=True, text=True, timeout=120)

    def outputs(run, *names):
        assert run.returncode == 0, f"weft predict: {run.stderr}"
        return [np.load(os.path.join(d, n + ".npy")) for n in names]
    x = randn(61, 5, 4)
    ref, scale = affine_ref(x, 1)
    (y,) = outputs(predict(f"{url}/affine", {"x": x}), "y")
    assert y.dtype == np.float32 and y.shape == (5, 3), y
    assert_close(y, ref, scale, 1e-6, "weft predict")
    for target, extra in ((f"{url}/affine/versions/1/infer", ()), (f"{url}/affine/", ("--json",))):
        assert bits_equal(outputs(predict(target, {"x": x}, *extra), "y")[0], y), f"{target} {extra}"
    a, b = randn(62, 2, 3), randn(63, 2, 3)
    s_ref, p_ref, p_scale = multi_ref(a, b)
    s, p = outputs(predict(f"{url}/multi", {"a": a, "b": b}), "s", "p")
    assert_close(s, s_ref, np.abs(a) + np.abs(b), 1e-6, "multi s")
    assert_close(p, p_ref, p_scale, 1e-6, "multi p")
    xi = np.array([[2**50, -1]], np.int64)
    for extra in ((), ("--json",)):
        (yi,) = outputs(predict(f"{url}/counter", {"x": xi}, *extra), "y")
        assert yi.dtype == np.int64 and yi.tolist() == (xi * 7 - 3).tolist(), yi
    write_text(os.path.join(d, "token"), "s3cret-token\n")
    aux = f"http://127.0.0.1:{env.aux().port}/v2/models/affine"
    assert_close(outputs(predict(aux, {"x": x}, "--token-file", os.path.join(d, "token")), "y")[0], ref, scale, 1e-6,
                 "with the token")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]  # nothing listens once the socket closes
    for target, feeds, words in [
            (f"{url}/nosuch", {"x": x}, ["404", '"nosuch"', "affine"]),
            (f"{url}/multi", {"a": a}, ["400", 'missing input "b"']),
            (f"{url}/affine", {"x": xi}, ["400", '"x"', "FP32", "INT64"]),
            (aux, {"x": x}, ["401", "bearer token"]),
            (f"https://127.0.0.1:{port}/v2/models/affine", {"x": x}, ["TLS handshake", f"127.0.0.1:{port}"]),
            (f"ftp://127.0.0.1:{port}/x", {"x": x}, ["is not a URL", "http://HOST:PORT/v2/models/NAME"]),
            (f"http://127.0.0.1:{port}/v1/models/affine", {"x": x}, ["is not a model's address"]),
            (f"http://127.0.0.1:{closed}/v2/models/affine", {"x": x}, ["cannot connect to", str(closed)])]:
        run = predict(target, feeds)
        assert run.returncode != 0 and all(w in run.stderr for w in words), f"{target}: {words} not in {run.stderr!r}"
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        run = predict(f"http://127.0.0.1:{silent.getsockname()[1]}/v2/models/affine", {"x": x}, "--timeout", "0.5")
        assert run.returncode != 0 and "did not answer within" in run.stderr, run.stderr
    run = subprocess.run([env.cli, "predict", f"{url}/affine", "--feed", "x=/nonexistent.npy"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode != 0 and "/nonexistent.npy" in run.stderr, run.stderr


TESTS = [test_health, test_predict, test_v2_infer, test_batching, test_metrics, test_errors, test_hostile,
         test_overload, test_bearer, test_hot_reload, test_sigterm, test_setup, test_cli_predict]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("weft")
    parser.add_argument("-k", default="", help="run the tests whose name contains this")
    parser.add_argument("--long", action="store_true", help="20 s of overload and a 5-minute soak")
    args = parser.parse_args()
    return run_tests(TESTS, Env(os.path.abspath(args.weft), args.long), args.k, "model-server tests")


def run_tests(tests, env, only, what):
    """Runs each of |tests| whose name contains |only| against |env|, printing ok/FAIL lines, then closes env
    (keeping its files when one failed). Returns the exit code."""
    failures, ran, start = 0, 0, time.time()
    try:
        for test in tests:
            name = test.__name__[len("test_"):]
            if only not in name:
                continue
            ran, t0 = ran + 1, time.time()
            try:
                note = test(env)
                print(f"ok   {name} ({time.time() - t0:.1f} s){': ' + note if note else ''}", flush=True)
            except Exception as e:  # noqa: BLE001 - one test's failure does not stop the others
                failures += 1
                where = ", ".join(f"{f.name}:{f.lineno}" for f in traceback.extract_tb(e.__traceback__)[1:])
                print(f"FAIL {name} ({time.time() - t0:.1f} s) at {where}: {type(e).__name__}: {e}", flush=True)
    finally:
        env.close(keep=failures > 0)
    print(f"{ran} {what} in {time.time() - start:.0f} s: {failures} failed")
    return 1 if failures or not ran else 0

if __name__ == "__main__":
    sys.exit(main())
