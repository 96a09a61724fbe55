#!/usr/bin/python3
"""serve_bench: Weft's model server under load (issue 37).

    serve_bench.py --weft BUILD/bin/weft --load BUILD/bin/weft_serve_load --ort-prefix BUILD/ort NAME...

NAME is serve_mobilenet, serve_resnet18 or serve_null. For an image model it
starts `weft model-server` on a temporary model folder (NAME/1/model.onnx,
from tools/onnx/export_models.py, as the onnx_* benchmarks get theirs) and
drives it with weft_serve_load at 1, 8 and 64 connections, for 8 s each,
with one 1x3x224x224 image per request in two encodings:

  v2bin  KServe v2 binary tensors (JSON header + raw bytes, answer binary).
         The peer is the offline limit: `weft bench` at the mean batch size
         the server reached in that run (weft_batch_size from /metrics), in
         images/s. speedup = the fraction of the offline rate the server
         delivers over HTTP.
  json   KServe v2 JSON, flat data. The peer is tools/bench/ort_serve_peer.js
         (Node's http + ONNX Runtime, no batching, the same threads) under
         the same load.

serve_null times a one-op model (Add on a [batch, 4] input) with small JSON
requests at 64 connections against the issue's target rate. The load
generator runs on one core of the same machine, so on a 2-core machine the
server has the other one (and what the load generator leaves).

Prints `BENCH <name> weft=<v> peer=<v> unit=req/s speedup=<x>` per run and a
`detail <name> ...` line with its latencies. Every server it starts is
stopped on the way out, also on an error or Ctrl-C. Talks to 127.0.0.1 only.
"""
import argparse
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3"  # Debian's, with numpy, onnx and torch
IMAGE_MODELS = {"serve_mobilenet": ("mobilenet", "mobilenet_v2"), "serve_resnet18": ("resnet18", "resnet18")}
NAMES = list(IMAGE_MODELS) + ["serve_null"]
CONNECTIONS = (1, 8, 64)
DURATION_S = 8
# Issue 37's target for serve_null: 15,000 small requests/s on this machine.
NULL_TARGET_RPS = 15000
OVERALL_S = 1800  # the whole invocation, whatever happens
READY_S = 120


class BenchError(Exception):
    pass


class Processes:
    """The servers this script started; stop_all() ends every one."""

    def __init__(self):
        self.running = []

    def start(self, cmd, log_path, ready_pattern, what):
        """Starts |cmd| and waits until a stdout line matches |ready_pattern|;
        returns (process, the pattern's first group as an int)."""
        log = open(log_path, "w")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
        log.close()
        self.running.append(proc)
        lines = queue.Queue()

        def pump():  # keeps reading, so a chatty server never blocks on a full pipe
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        end = time.monotonic() + READY_S
        while time.monotonic() < end:
            try:
                line = lines.get(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                continue
            if line is None:
                raise BenchError(f"{what} exited ({proc.wait()}) before it was ready: {tail(log_path)}")
            match = re.search(ready_pattern, line)
            if match:
                return proc, int(match.group(1))
        raise BenchError(f"{what} was not ready within {READY_S} s: {tail(log_path)}")

    def stop(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.running:
            self.running.remove(proc)

    def stop_all(self):
        for proc in list(self.running):
            self.stop(proc)


def tail(path, lines=8):
    try:
        with open(path) as f:
            return f"\n  {path}: " + "\n  ".join(f.read().splitlines()[-lines:])
    except OSError:
        return ""


def bench_line(name, weft, peer):
    speedup = weft / peer if peer > 0 else 0
    print(f"BENCH {name} weft={weft:.4g} peer={peer:.4g} unit=req/s speedup={speedup:.3f}", flush=True)


def codes_text(codes):
    return ",".join(f"{code}:{n}" for code, n in sorted(codes.items())) or "none"


def detail_line(name, **figures):
    print(f"detail {name} " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


def export_onnx(build, model):
    """The exported model, made once under BUILD/onnx_bench like onnx_* benchmarks' (weft_bench)."""
    outdir = os.path.join(build, "onnx_bench")
    path = os.path.join(outdir, model + ".onnx")
    if not os.path.exists(path):
        cmd = [PYTHON, os.path.join(SOURCE, "tools/onnx/export_models.py"), outdir, "--models", model, "--batch", "1"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise BenchError(f"exporting {model} failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return path


def null_onnx(path):
    """y = x + 1 on a float [batch, 4] input: one op, so the server's own cost shows."""
    import onnx
    from onnx import TensorProto, helper

    one = helper.make_tensor("one", TensorProto.FLOAT, [4], [1.0] * 4)
    graph = helper.make_graph([helper.make_node("Add", ["x", "one"], ["y"])], "null",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], initializer=[one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def json_body(name, x):
    # %.9g: the shortest text that gives every float32 back exactly.
    data = ",".join(map("{:.9g}".format, x.ravel().tolist()))
    return (f'{{"inputs":[{{"name":"{name}","shape":{list(x.shape)},"datatype":"FP32","data":[{data}]}}]}}').encode()


def binary_body(name, x, output):
    """A KServe v2 binary-tensor request and its Inference-Header-Content-Length."""
    header = {"inputs": [{"name": name, "shape": list(x.shape), "datatype": "FP32",
                          "parameters": {"binary_data_size": x.nbytes}}],
              "outputs": [{"name": output, "parameters": {"binary_data": True}}]}
    text = json.dumps(header, separators=(",", ":")).encode()
    return text + x.astype("<f4").tobytes(), len(text)


class Request:
    """One request body on disk, with the headers it goes with."""

    def __init__(self, tmp, tag, body, headers):
        self.path = os.path.join(tmp, tag + ".body")
        with open(self.path, "wb") as f:
            f.write(body)
        self.body = body
        self.headers = headers


def check_answers(port, url_path, request, what):
    """One request by hand first: a wrong body fails here, with the server's message."""
    http_request = urllib.request.Request(f"http://127.0.0.1:{port}{url_path}", data=request.body, method="POST",
                                          headers=dict(h.split(": ", 1) for h in request.headers))
    try:
        with urllib.request.urlopen(http_request, timeout=60) as answer:
            answer.read()
    except urllib.error.HTTPError as e:
        raise BenchError(f"{what}: POST {url_path} answered {e.code}: {e.read()[:300]!r}") from None
    except OSError as e:
        raise BenchError(f"{what}: POST {url_path} failed: {e}") from None


def drive(args, port, url_path, request, connections, warmup, deadline):
    """weft_serve_load's figures (its --json object) for one run."""
    cmd = [args.load, "--url", f"http://127.0.0.1:{port}{url_path}", "--body", request.path, "--connections",
           str(connections), "--duration", str(args.duration), "--warmup", str(warmup), "--timeout-ms", "60000",
           "--json"]
    for header in request.headers:
        cmd += ["--header", header]
    timeout = min(args.duration + 240, max(1, deadline - time.monotonic()))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"weft_serve_load did not finish within {timeout:.0f} s: {' '.join(cmd)}") from None
    if done.stderr.strip():
        sys.stderr.write("".join(f"  {line}\n" for line in done.stderr.strip().splitlines()))
    if done.returncode != 0:
        raise BenchError(f"weft_serve_load failed ({done.returncode}): {' '.join(cmd)}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["errors"] or set(result["codes"]) - {"200"}:
        print(f"# {url_path} at {connections} connections: codes {result['codes']}, errors {result['errors']}",
              file=sys.stderr)
    return result


def batch_totals(port, model):
    """weft_batch_size's _sum and _count for |model|, from /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    totals = {"sum": 0.0, "count": 0.0}
    for m in re.finditer(r"^weft_batch_size_(sum|count)\{([^}]*)\}\s+(\S+)", text, re.M):
        if f'model="{model}"' in m.group(2):
            totals[m.group(1)] += float(m.group(3))
    return totals["sum"], totals["count"]


def offline_rate(args, onnx_path, batch, deadline):
    """`weft bench` at |batch|: (images/s, ms per batch at p50)."""
    cmd = [args.weft, "bench", onnx_path, "--shape", f"input={batch}x3x224x224", "--threads", str(args.threads),
           "--warmup", "3", "--repeat", "30" if batch <= 8 else "10", "--json"]
    timeout = max(1, min(600, deadline - time.monotonic()))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"timed out: {' '.join(cmd)}") from None
    if done.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-1000:]}")
    figures = json.loads(done.stdout)
    return figures["runs_per_second"] * batch, figures["p50_ms"]


def start_weft(args, procs, tmp, name, onnx_path):
    models = os.path.join(tmp, "models")
    os.makedirs(os.path.join(models, name, "1"), exist_ok=True)
    shutil.copyfile(onnx_path, os.path.join(models, name, "1", "model.onnx"))
    cmd = [args.weft, "model-server", "--models", models, "--http-port", "0", "--host", "127.0.0.1"]
    return procs.start(cmd, os.path.join(tmp, "weft.log"), r"listening on http://[^\s:]+:(\d+)", "weft model-server")


def image_model(args, procs, tmp, bench, deadline):
    name, export_name = IMAGE_MODELS[bench]
    onnx_path = export_onnx(args.build, export_name)
    x = np.random.default_rng(37).random((1, 3, 224, 224), dtype=np.float32)
    body, header_size = binary_body("input", x, "output")  # export_models.py names them input and output
    requests = {
        "v2bin": Request(tmp, "v2bin", body, ["Content-Type: application/octet-stream",
                                              f"Inference-Header-Content-Length: {header_size}"]),
        "json": Request(tmp, "json", json_body("input", x), ["Content-Type: application/json"]),
    }
    url_path = f"/v2/models/{name}/infer"
    weft_runs, batches = {}, {}
    proc, port = start_weft(args, procs, tmp, name, onnx_path)
    try:
        for encoding, request in requests.items():
            check_answers(port, url_path, request, f"weft model-server ({encoding})")
            for c in CONNECTIONS:
                before = batch_totals(port, name)
                weft_runs[encoding, c] = drive(args, port, url_path, request, c, max(5, 2 * c), deadline)
                after = batch_totals(port, name)
                count = after[1] - before[1]
                batches[encoding, c] = (after[0] - before[0]) / count if count > 0 else 1.0
    finally:
        procs.stop(proc)
    # Each side alone on the machine: the server is stopped before the offline runs and the peer.
    offline = {}
    for c in CONNECTIONS:
        batch = max(1, round(batches["v2bin", c]))
        if batch not in offline:
            offline[batch] = offline_rate(args, onnx_path, batch, deadline)
    peer_runs = {}
    if args.ort_prefix:
        cmd = ["node", os.path.join(SOURCE, "tools/bench/ort_serve_peer.js"), args.ort_prefix, onnx_path, "0",
               str(args.threads)]
        proc, port = procs.start(cmd, os.path.join(tmp, "ort.log"), r"^listening (\d+)", "ort_serve_peer.js")
        try:
            check_answers(port, url_path, requests["json"], "ort_serve_peer.js")
            for c in CONNECTIONS:
                peer_runs[c] = drive(args, port, url_path, requests["json"], c, max(5, 2 * c), deadline)
        finally:
            procs.stop(proc)
    for c in CONNECTIONS:
        run, batch = weft_runs["v2bin", c], max(1, round(batches["v2bin", c]))
        rate, batch_ms = offline[batch]
        bench_line(f"{bench}_v2bin_c{c}", run["rps"], rate)
        detail_line(f"{bench}_v2bin_c{c}", weft_p50_ms=run["p50_ms"], weft_p99_ms=run["p99_ms"],
                    mean_batch=f"{batches['v2bin', c]:.2f}", offline_batch=batch, offline_p50_ms_per_batch=batch_ms,
                    errors=run["errors"], codes=codes_text(run["codes"]))
    for c in CONNECTIONS:
        run, peer = weft_runs["json", c], peer_runs.get(c)
        bench_line(f"{bench}_json_c{c}", run["rps"], peer["rps"] if peer else 0)
        detail_line(f"{bench}_json_c{c}", weft_p50_ms=run["p50_ms"], weft_p99_ms=run["p99_ms"],
                    peer_p50_ms=peer["p50_ms"] if peer else "-", peer_p99_ms=peer["p99_ms"] if peer else "-",
                    mean_batch=f"{batches['json', c]:.2f}", errors=run["errors"], codes=codes_text(run["codes"]))


def null_model(args, procs, tmp, deadline):
    onnx_path = os.path.join(tmp, "null.onnx")
    null_onnx(onnx_path)
    request = Request(tmp, "null", b'{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}',
                      ["Content-Type: application/json"])
    url_path = "/v2/models/null/infer"
    proc, port = start_weft(args, procs, tmp, "null", onnx_path)
    try:
        check_answers(port, url_path, request, "weft model-server")
        run = drive(args, port, url_path, request, 64, 1000, deadline)
        total, count = batch_totals(port, "null")
    finally:
        procs.stop(proc)
    bench_line("serve_null", run["rps"], NULL_TARGET_RPS)
    detail_line("serve_null", weft_p50_ms=run["p50_ms"], weft_p99_ms=run["p99_ms"], peer="issue_37_target",
                mean_batch=f"{total / count if count else 0:.2f}", errors=run["errors"], codes=codes_text(run["codes"]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weft", required=True, help="BUILD/bin/weft")
    parser.add_argument("--load", required=True, help="BUILD/bin/weft_serve_load")
    parser.add_argument("--ort-prefix", default="", help="where npm installed onnxruntime-node (BUILD/ort); "
                        "without it the json lines have no peer")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="the ORT peer's and weft bench's threads (default: the cores, Weft's default)")
    parser.add_argument("--duration", type=float, default=DURATION_S, help="seconds per load run")
    parser.add_argument("names", nargs="+", metavar="NAME", choices=NAMES)
    args = parser.parse_args()
    args.build = os.path.dirname(os.path.dirname(os.path.abspath(args.weft)))
    for tool in (args.weft, args.load):
        if not os.access(tool, os.X_OK):
            sys.exit(f"serve_bench.py: {tool} is not an executable (build it first)")
    args.ort_prefix = os.path.abspath(args.ort_prefix) if args.ort_prefix else ""  # node resolves it from the script
    if args.ort_prefix and not os.path.exists(os.path.join(args.ort_prefix, "node_modules/onnxruntime-node")):
        print(f"serve_bench.py: no onnxruntime-node under {args.ort_prefix}; the json lines have no peer",
              file=sys.stderr)
        args.ort_prefix = ""
    # SIGTERM ends the script the way Ctrl-C does: through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    deadline = time.monotonic() + OVERALL_S
    procs = Processes()
    failed = False
    try:
        for bench in args.names:
            if time.monotonic() > deadline:
                raise BenchError(f"out of time ({OVERALL_S} s) before {bench}")
            with tempfile.TemporaryDirectory(prefix="serve_bench_") as tmp:
                try:
                    if bench == "serve_null":
                        null_model(args, procs, tmp, deadline)
                    else:
                        image_model(args, procs, tmp, bench, deadline)
                except BenchError as e:
                    print(f"serve_bench.py: {bench}: {e}", file=sys.stderr)
                    failed = True
    except KeyboardInterrupt:
        print("serve_bench.py: interrupted; stopping the servers it started", file=sys.stderr)
        failed = True
    finally:
        procs.stop_all()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
