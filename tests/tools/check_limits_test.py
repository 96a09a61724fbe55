#!/usr/bin/env python3
"""tools/check_limits.py on a small git tree made here: each limit is
caught with its message, listed breaches may shrink but not grow, and a
clean tree passes. Run by ctest (tools.check_limits)."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "check_limits.py")
failures = []


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def function(name, body_lines, head="void"):
    # A function of 2 + body_lines lines: head, body, closing brace.
    return f"{head} {name}() {{\n" + "  x();\n" * body_lines + "}\n"


def run(root):
    r = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(condition, what, output):
    if not condition:
        failures.append(f"{what}\n--- output:\n{output}")


with tempfile.TemporaryDirectory() as root:
    subprocess.run(["git", "init", "-q", root], check=True)
    write(root, "tools/limits_debt.txt", "# known\ngrown.cc 1005\nshrunk.cc 1200\ngone.cc 1100\nok.cc:Listed 250\n")
    write(root, "big.cc", "int a;\n" * 1001)
    write(root, "grown.cc", "int a;\n" * 1010)
    write(root, "shrunk.cc", "int a;\n" * 10)
    write(root, "fine.py", "a = 1\n" * 1000)  # exactly the limit
    write(
        root,
        "ok.cc",
        function("Long", 199)  # 201 lines
        + function("Exact", 198)  # 200 lines: within
        + function("Listed", 100),  # listed at 250, now 102: remove it
    )
    write(root, "reg.cc", function("RegisterMathOps", 300, "Status"))  # a registration table
    write(
        root,
        "s.cc",
        # Braces in strings, comments, lambdas and initialiser lists are
        # not functions of their own; the constructor's body is counted.
        'struct S {\n  S() : a_{1}, b_(2) {\n    auto f = [] { return "{"; };  // }\n'
        + "    f();\n" * 250
        + "  }\n  int a_, b_;\n};\n",
    )
    write(root, "plugins/devices/x/k.cc", '#include "core/base/status.h"\n#include "weft/weft_device.h"\n')
    code, out = run(root)
    expect(code == 1, "a tree with breaches exits 1", out)
    expect("big.cc: the file is 1001 lines, over the limit of 1000; split it" in out, "a long file", out)
    expect("fine.py" not in out, "a file of exactly 1000 lines passes", out)
    expect("ok.cc:Long: function Long (line 1) is 201 lines, over the limit of 200" in out, "a long function", out)
    expect("Exact" not in out, "a function of exactly 200 lines passes", out)
    expect("RegisterMathOps" not in out, "registration tables are exempt", out)
    expect("s.cc:S: function S (line 2) is 253 lines" in out, "the constructor is one function", out)
    expect("grown.cc: the file grew to 1010 lines from 1005" in out, "a listed file that grew", out)
    expect(
        "shrunk.cc: the file is 10 lines now, within the limit of 1000; remove it from tools/limits_debt.txt" in out,
        "a listed file within the limit",
        out,
    )
    expect("gone.cc: listed in tools/limits_debt.txt but no longer over a limit (or gone)" in out, "a listed file gone", out)
    expect("ok.cc:Listed: function Listed (line" in out and "within the limit of 200" in out, "a listed function", out)
    expect(
        'plugins/devices/x/k.cc:1: a plugin includes "core/base/status.h"; plugins build against sdk/ only' in out,
        "a plugin including core/",
        out,
    )
    expect("check_limits: 8 problem(s); 4 known breach(es) listed to shrink" in out, "the summary line", out)

with tempfile.TemporaryDirectory() as root:
    subprocess.run(["git", "init", "-q", root], check=True)
    write(root, "a.cc", function("Short", 10))
    code, out = run(root)
    expect(code == 0 and "check_limits: 0 problem(s); 0 known breach(es)" in out, "a clean tree passes", out)

with tempfile.TemporaryDirectory() as root:
    subprocess.run(["git", "init", "-q", root], check=True)
    write(root, "tools/limits_debt.txt", "a.cc twelve\n")
    code, out = run(root)
    expect(code != 0 and "limits_debt.txt:1: expected '<file>[:function] <lines>', got 'a.cc twelve'" in out,
           "a malformed debt list", out)

for f in failures:
    print("FAIL:", f)
print(f"check_limits_test: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
