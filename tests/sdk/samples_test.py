#!/usr/bin/env python3
"""Every code sample a plugin author reads is real code.

The samples are the C and C++ blocks of docs/plugins.md (fenced ```c and
```cpp) and the code in the SDK headers' comments (runs of comment lines
indented by at least two more spaces than the prose: `//   code` and
` *   code`). Each must either

  - compile on its own, after the SDK's headers, as C++17 with warnings as
    errors (a complete sample), or
  - be an excerpt of a file that the build compiles: every line of it
    (white space folded, `...` lines skipped) appears, in order, in one of
    the SDK's example and test plugins or Weft's own plugins.

So no sample can drift from the ABI: a renamed member breaks the compile,
or the excerpt no longer matches the code it was taken from.

Usage: samples_test.py SOURCE_DIR CC CXX
"""
import os
import re
import subprocess
import sys
import tempfile

SRC, CC, CXX = sys.argv[1], sys.argv[2], sys.argv[3]
INCLUDE = os.path.join(SRC, "sdk", "include")

# Files the build compiles, which excerpts may come from.
CORPUS_DIRS = ["tests/sdk", "tests/plugins", "plugins"]
CORPUS_EXT = (".c", ".cc", ".h", ".cu", ".txt")


def fold(line):
    """White space folded, a trailing // comment dropped."""
    line = re.sub(r"\s//.*$", "", line) if not line.lstrip().startswith("//") else line
    return " ".join(line.split())


def corpus():
    files = {}
    for d in CORPUS_DIRS:
        for root, _, names in os.walk(os.path.join(SRC, d)):
            for n in names:
                if n.endswith(CORPUS_EXT):
                    path = os.path.join(root, n)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        files[os.path.relpath(path, SRC)] = [fold(l) for l in f]
    return files


def is_excerpt(lines, files):
    wanted = [fold(l) for l in lines if fold(l) and fold(l) != "..." and not fold(l).startswith("//")]
    if not wanted:
        return "empty"
    for path, have in files.items():
        i = 0
        for line in have:
            if i < len(wanted) and line == wanted[i]:
                i += 1
        if i == len(wanted):
            return path
    return None


def compiles(code, lang):
    """Whether |code| compiles after the SDK's headers: at file scope, or
    as the body of a function (a sample of statements). C samples (the C
    ABI headers' and ```c blocks) as C99, the others as C++17."""
    if lang == "c":
        prelude = '#include "weft/weft_plugin.h"\n'
        compiler, std, ext = CC, "-std=c99", "c"
    else:
        headers = sorted(os.listdir(os.path.join(INCLUDE, "weft", "sdk")))
        prelude = "#include <string>\n" + "".join(f'#include "weft/sdk/{h}"\n' for h in headers)
        compiler, std, ext = CXX, "-std=c++17", "cc"
    err = ""
    for wrap in ("{}", "void weft_sample(void) {{\n{}\n}}"):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "sample." + ext)
            with open(src, "w") as f:
                f.write(prelude + "\n" + wrap.format(code) + "\n")
            r = subprocess.run([compiler, std, "-Wall", "-Wextra", "-Werror", "-Wno-unused-function",
                                "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-Wno-unused-parameter",
                                "-I", INCLUDE, "-fsyntax-only", src], capture_output=True, text=True)
            if r.returncode == 0:
                return True, ""
            err = err or r.stderr
    return False, err


def doc_samples(path):
    samples = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*```(c|cpp|c\+\+)\s*$", lines[i])
        if m:
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            samples.append((f"{os.path.relpath(path, SRC)}:{start}", "c" if m.group(1) == "c" else "cpp",
                            lines[start:j]))
            i = j
        i += 1
    return samples


def header_samples(path):
    """Runs of comment lines indented deeper than the comment's prose."""
    samples = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    # A sample starts after an empty comment line, indented at least three
    # spaces past the comment marker, and runs while lines stay indented
    # (blank comment lines inside it are kept).
    prefix = re.compile(r"^\s*(?://|/?\*)(\s*)(.*)$")
    run, start, after_blank = [], None, False
    for n, line in enumerate(lines + [""], 1):
        m = prefix.match(line) if not line.lstrip().startswith("*/") else None
        empty = m is not None and m.group(2) == ""
        deep = m is not None and len(m.group(1)) >= 3 and m.group(2) != ""
        if deep and (run or after_blank):
            if not run:
                start = n
            run.append(" " * (len(m.group(1)) - 3) + m.group(2))
        elif empty and run:
            run.append("")
        else:
            while run and run[-1] == "":
                run.pop()
            if len(run) >= 1:
                lang = "cpp" if os.path.basename(os.path.dirname(path)) == "sdk" else "c"
                samples.append((f"{os.path.relpath(path, SRC)}:{start}", lang, run))
            run = []
        after_blank = empty
    return samples


def main():
    files = corpus()
    samples = doc_samples(os.path.join(SRC, "docs", "plugins.md"))
    sdk = os.path.join(INCLUDE, "weft")
    for d in (sdk, os.path.join(sdk, "sdk")):
        for n in sorted(os.listdir(d)):
            if n.endswith(".h"):
                samples += header_samples(os.path.join(d, n))
    failed = 0
    compiled = excerpts = 0
    for where, lang, lines in samples:
        code = "\n".join(lines)
        ok, err = compiles(code, lang)
        if ok:
            compiled += 1
            continue
        source = is_excerpt(lines, files)
        if source:
            excerpts += 1
            continue
        failed += 1
        first = "\n".join(l for l in err.splitlines() if "error" in l)[:600]
        print(f"FAIL: {where}: the sample neither compiles nor is an excerpt of a compiled file:\n"
              + "\n".join("    " + l for l in lines) + f"\n  compiler: {first}\n")
    print(f"{len(samples)} samples: {compiled} compile on their own, {excerpts} are excerpts of compiled files,"
          f" {failed} are neither")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
