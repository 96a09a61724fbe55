#!/usr/bin/env python3
"""Keeps the sample outputs in docs/ true: runs each marked sample's
commands with the real `weft` and checks (or rewrites) what the block shows.

A sample is a fenced block right after a marker line:

    <!-- sample -->            the block's `$ ` commands run to their end
    <!-- sample: serves -->    the command serves until stopped: it runs until
                               it printed as many lines as the block shows,
                               then gets SIGTERM

Lines after a `$ ` command are its output. `build/bin/weft` in a command is
the binary given with --weft. A config a serving command names is copied
with every 127.0.0.1 port replaced by a free one (so that a test does not
take the documented ports), and the ports are put back in what it printed.

    tools/docs/samples.py --weft build/bin/weft --check     # CI (doc_samples)
    tools/docs/samples.py --weft build/bin/weft --update    # rewrite the blocks

--check compares the shape of each line: numbers and incarnations may
differ (ports, timings), words may not. It exits 1 naming the file, line
and both versions of every line that differs.
"""
import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MARKER = re.compile(r"^<!-- sample(?::\s*(\w+))?\s*-->\s*$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shape(line):
    """A line with its numbers and incarnations made placeholders."""
    line = re.sub(r"\b[0-9a-f]{9,12}-[0-9a-f]{4}\b", "<incarnation>", line)
    return re.sub(r"\d+(\.\d+)?", "<n>", line.rstrip())


def find_samples(path):
    """(mode, first line index of the block's body, body lines) of each sample."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    samples = []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            end = i + 2
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if end == len(lines):
                sys.exit(f"{path}:{i + 2}: the sample's block is not closed")
            samples.append((m.group(1) or "run", i + 2, lines[i + 2:end]))
            i = end
        i += 1
    return lines, samples


def with_free_ports(args, tmp):
    """args with each .toml copied, its loopback ports made free ones; the
    map from free port back to documented port."""
    back = {}
    out = []
    for a in args:
        if a.endswith(".toml") and os.path.exists(os.path.join(ROOT, a)):
            with open(os.path.join(ROOT, a), encoding="utf-8") as f:
                text = f.read()

            def swap(m):
                port = free_port()
                back[str(port)] = m.group(1)
                return f"127.0.0.1:{port}"

            text = re.sub(r"127\.0\.0\.1:(\d+)", swap, text)
            copy = os.path.join(tmp, os.path.basename(a))
            with open(copy, "w", encoding="utf-8") as f:
                f.write(text)
            out.append(copy)
        else:
            out.append(a)
    return out, back


def run_command(command, weft, mode, want_lines, tmp):
    args = shlex.split(command)
    args = [weft if a == "build/bin/weft" else a for a in args]
    env = dict(os.environ, WEFT_PLUGIN_PATH=os.environ.get("WEFT_PLUGIN_PATH", ""))
    if mode != "serves":
        done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        return (done.stdout + done.stderr).rstrip("\n").split("\n")
    args, back = with_free_ports(args, tmp)
    log = os.path.join(tmp, "serve.log")
    with open(log, "w") as out:
        p = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    text = ""
    while time.monotonic() < deadline and p.poll() is None:
        with open(log, encoding="utf-8") as f:
            text = f.read()
        if text.count("\n") >= want_lines:
            break
        time.sleep(0.05)
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    with open(log, encoding="utf-8") as f:
        text = f.read()
    for port, documented in back.items():
        text = text.replace(f":{port}", f":{documented}")
    return text.rstrip("\n").split("\n")[:want_lines]


def real_block(body, weft, mode, tmp):
    """The block as the commands print it now."""
    out = []
    i = 0
    while i < len(body):
        line = body[i]
        if not line.startswith("$ "):
            sys.exit(f"a sample block must start with a `$ ` command, not {line!r}")
        j = i + 1
        while j < len(body) and not body[j].startswith("$ "):
            j += 1
        out.append(line)
        out.extend(run_command(line[2:], weft, mode, j - i - 1, tmp))
        i = j
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weft", required=True, help="the weft binary (build/bin/weft)")
    parser.add_argument("docs", nargs="*", help="markdown files (default: every docs/*.md)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--check", action="store_true", help="exit 1 when a sample no longer has the output's shape")
    what.add_argument("--update", action="store_true", help="rewrite each sample with the real output")
    opts = parser.parse_args()
    weft = os.path.abspath(opts.weft)
    docs = opts.docs or sorted(
        os.path.join(ROOT, "docs", n) for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md"))
    failures = 0
    count = 0
    with tempfile.TemporaryDirectory(prefix="weft_doc_samples_") as tmp:
        for path in docs:
            lines, samples = find_samples(path)
            changed = False
            for mode, start, body in reversed(samples):
                count += 1
                real = real_block(body, weft, mode, tmp)
                name = os.path.relpath(path, ROOT)
                if opts.update:
                    if real != body:
                        lines[start:start + len(body)] = real
                        changed = True
                        print(f"{name}:{start + 1}: rewritten ({len(real)} lines)")
                    continue
                if [shape(x) for x in real] != [shape(x) for x in body]:
                    failures += 1
                    print(f"{name}:{start + 1}: the sample no longer matches what `{body[0][2:]}` prints:")
                    for k in range(max(len(real), len(body))):
                        doc = body[k] if k < len(body) else "(nothing)"
                        now = real[k] if k < len(real) else "(nothing)"
                        if k >= len(body) or k >= len(real) or shape(doc) != shape(now):
                            print(f"  line {start + 1 + k}:\n    docs: {doc}\n    now:  {now}")
            if changed:
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join(lines))
    if opts.check:
        print(f"{count - failures} passed, {failures} failed")
        return 1 if failures else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
