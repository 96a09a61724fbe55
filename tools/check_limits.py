#!/usr/bin/env python3
"""The size limits of the house (docs/development.md, "Limits"), checked by
.ci/run:

  * no source file over 1,000 lines (generated files are not in git);
  * no C++ function over 200 lines, apart from op-registration tables
    (functions named Register...);
  * no plugin includes a header of core/ (plugins build against sdk/ only);
  * the Layout of docs/development.md names every folder of the tree's
    rooms (core/*, plugins/<kind>/*, sdk/include/weft/*, tools/*, tests/*)
    and no folder that is gone.

Files and functions that broke a limit before it was kept are listed in
tools/limits_debt.txt with their size at the time. Such an entry may only
shrink: it fails when the file or function grew, and asks to be removed once
it is within the limit (or gone). Nothing new may join the list.

  tools/check_limits.py            check the tree, exit 1 on a breach
  tools/check_limits.py --report   also list the 20 longest functions
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE_LIMIT = 1000
FUNCTION_LIMIT = 200
SOURCE = re.compile(r"\.(cc|h|cpp|hpp|c|cu|cl|hip|py|sh|cmake)$|(^|/)CMakeLists\.txt$")
CXX = re.compile(r"\.(cc|h|cpp|hpp|c|cu|hip)$")
NOT_A_FUNCTION = re.compile(r"^\s*(namespace|class|struct|union|enum|extern|if|for|while|switch|do|else|try|catch)\b")
CONSTRUCTOR_INIT = re.compile(r"\)\s*(noexcept\s*)?:[^:].*[\w>]$")
ENDS_LIKE_A_FUNCTION = re.compile(r"(\)|\bconst|\boverride|\bfinal|\bnoexcept|\bmutable|->\s*[\w:<>,*& ]+)$")


def tracked_files(root):
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root, check=True, capture_output=True, text=True
    ).stdout
    return [f for f in out.splitlines() if SOURCE.search(f) and os.path.isfile(os.path.join(root, f))]


def strip_code(text):
    """|text| with comments, string and character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m is None:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line, line count) of each function body at namespace or
    class scope (lambdas and blocks inside functions count with them)."""
    code = strip_code(text)
    # A scope stack: for each open brace, whether it is a function body.
    stack = []
    found = []
    head_start = 0  # where the text since the last ; { } begins
    line = 1
    in_function = 0
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[head_start:i]
            is_function = False
            if in_function == 0:
                flat = " ".join(head.split())
                # A function's head ends in its parameter list, then maybe
                # qualifiers or a trailing return type; a constructor's may
                # end in its initialiser list.
                if (
                    ")" in flat
                    and ENDS_LIKE_A_FUNCTION.search(flat)
                    and not NOT_A_FUNCTION.match(flat)
                    and not flat.startswith("#")
                    and "=" not in flat.split("(")[0].replace("operator", "")
                ):
                    is_function = True
            if is_function:
                first = line - head.count("\n") + head[: len(head) - len(head.lstrip())].count("\n")
                words = flat.split("(")[0].split()
                name = words[-1] if words else "?"
                if len(name) >= 4 and name.isupper():  # a macro such as TEST_F(Suite, Name)
                    name += "(" + flat.split("(", 1)[1].split(")")[0].replace(" ", "") + ")"
                stack.append((True, first, name))
                in_function += 1
            elif in_function == 0 and CONSTRUCTOR_INIT.search(" ".join(head.split())):
                # A member initialised with braces in a constructor's
                # initialiser list: the head goes on past it.
                stack.append((None, line, ""))
                continue
            else:
                stack.append((False, line, ""))
            head_start = i + 1
        elif c == "}":
            if stack:
                is_function, first, name = stack.pop()
                if is_function is None:
                    continue
                if is_function:
                    in_function -= 1
                    found.append((name, first, line - first + 1))
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
    return found


ROOMS = ("core/", "plugins/devices/", "plugins/transports/", "plugins/collectives/", "tools/", "tests/", "sdk/include/weft/")


def layout_problems(root, files):
    """What docs/development.md's Layout block gets wrong about the tree."""
    doc = os.path.join(root, "docs", "development.md")
    if not os.path.exists(doc):
        return []
    with open(doc) as f:
        text = f.read()
    start = text.find("## Layout")
    block_start = text.find("```", start)
    block_end = text.find("```", block_start + 3)
    if start < 0 or block_start < 0 or block_end < 0:
        return ["docs/development.md: no \"## Layout\" section with a ``` block of folders"]
    listed = set()
    for l in text[block_start + 3 : block_end].splitlines():
        if l.strip() and not l.startswith(" "):
            listed.add(l.split()[0].rstrip("/") + "/")
    folders = set()
    for f in files:
        for room in ROOMS:
            if f.startswith(room) and "/" in f[len(room) :]:
                folders.add(room + f[len(room) :].split("/")[0] + "/")
    problems = []
    for folder in sorted(folders - listed):
        problems.append(f"docs/development.md, Layout: {folder} is in the tree but not listed; say what it holds")
    for folder in sorted(listed):
        if folder.startswith(ROOMS) and not os.path.isdir(os.path.join(root, folder)):
            problems.append(f"docs/development.md, Layout: lists {folder}, which is not in the tree")
    return problems


def load_debt(path):
    debt = {}
    if not os.path.exists(path):
        return debt
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            text = raw.split("#", 1)[0].strip()
            if not text:
                continue
            parts = text.split()
            if len(parts) != 2 or not parts[1].isdigit():
                sys.exit(f"{path}:{number}: expected '<file>[:function] <lines>', got {raw.strip()!r}")
            debt[parts[0]] = int(parts[1])
    return debt


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", action="store_true", help="also list the 20 longest functions")
    parser.add_argument("--root", default=ROOT, help="the tree to check (a git work tree; default: this one)")
    parser.add_argument("--debt", help="the list of known breaches (default: ROOT/tools/limits_debt.txt)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if args.debt is None:
        args.debt = os.path.join(root, "tools", "limits_debt.txt")
    debt = load_debt(args.debt)
    seen = set()  # listed breaches still over their limit
    reported = set()  # listed breaches with a problem reported
    problems = []
    longest = []

    def check(key, size, limit, what):
        if size <= limit:
            if key in debt:
                reported.add(key)
                problems.append(f"{key}: {what} is {size} lines now, within the limit of {limit}; remove it from {os.path.relpath(args.debt, root)}")
            return
        seen.add(key)
        if key not in debt:
            problems.append(f"{key}: {what} is {size} lines, over the limit of {limit}; split it (docs/development.md, \"Limits\")")
        elif size > debt[key]:
            reported.add(key)
            problems.append(f"{key}: {what} grew to {size} lines from {debt[key]} (listed in {os.path.relpath(args.debt, root)} to shrink, not grow)")

    files = tracked_files(root)
    problems.extend(layout_problems(root, files))
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        check(path, text.count("\n"), FILE_LIMIT, "the file")
        if path.startswith("plugins/"):
            for number, l in enumerate(text.splitlines(), 1):
                if re.match(r'\s*#\s*include\s*[<"]core/', l):
                    problems.append(f"{path}:{number}: a plugin includes {l.split()[-1]}; plugins build against sdk/ only")
        if CXX.search(path):
            for name, first, size in functions(text):
                longest.append((size, f"{path}:{first} {name}"))
                if name.split("::")[-1].startswith("Register"):
                    continue  # an op-registration table
                check(f"{path}:{name}", size, FUNCTION_LIMIT, f"function {name} (line {first})")
    for key in debt:
        if key not in seen and key not in reported:
            problems.append(f"{key}: listed in {os.path.relpath(args.debt, root)} but no longer over a limit (or gone); remove the line")
    if args.report:
        print("the longest functions:")
        for size, where in sorted(longest, reverse=True)[:20]:
            print(f"  {size:5d}  {where}")
    for p in problems:
        print(p)
    listed = len(debt)
    print(f"check_limits: {len(problems)} problem(s); {listed} known breach(es) listed to shrink")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
