#!/usr/bin/python3
"""Debian package descriptions as a bag-of-words classification data set.

Reads the package stanzas apt knows about (`apt-cache dumpavail`; when that
fails or yields fewer than 2000 packages, /var/lib/dpkg/status) and writes
one example per package: its name and Description (synopsis and, when the
stanza or an apt Translation-en file has it, the long text), labelled with
its Section. Used by configs/debian_bow.toml and
configs/debian_bow_cluster.toml to train configs/models/debian_bow.wgt.

  * Packages are deduplicated by name (the first stanza wins).
  * The label is the Section without a "contrib/", "non-free/" or
    "non-free-firmware/" prefix; only the 16 most frequent sections are kept
    (ties broken by name), label 0 being the most frequent, and packages of
    other sections are dropped.
  * The text ("<name> <description>") is lowercased and cut into tokens
    [a-z0-9]+. Each token t_i gives its unigram "t_i" and, from the second
    token on, the bigram "t_{i-1} t_i" (one space between), interleaved:
    u_0, u_1, b_01, u_2, b_12, ...
  * A feature id is FNV-1a 64-bit over the UTF-8 bytes of the unigram or
    bigram, mod (1048576 - 1), plus 1: ids lie in [1, 1048576), and 0 is
    padding. Each example keeps its first 64 ids, padded with 0.
  * A package is in the test set when FNV-1a 64(name) % 10 == 0, otherwise
    in the training set.

The output directory gets train_ids.npy and test_ids.npy (float32 [N, 64]:
the trainer feeds float features; ids below 2^24 are exact in float32),
train_labels.npy and test_labels.npy (int64 [N]) and sections.txt (line i:
the section of label i). Everything is a function of the input text alone,
so the same apt lists give the same files, byte for byte.
"""

import argparse
import os
import re
import subprocess
import sys
import time

VOCAB = 1 << 20  # feature ids in [1, VOCAB); the embedding has VOCAB rows
LENGTH = 64  # ids per example
CLASSES = 16  # most frequent sections kept
MIN_PACKAGES = 2000  # fewer from apt-cache: fall back to the dpkg status file
DPKG_STATUS = "/var/lib/dpkg/status"
APT_LISTS = "/var/lib/apt/lists"
APT_HELPER = "/usr/lib/apt/apt-helper"
SECTION_PREFIXES = ("contrib/", "non-free/", "non-free-firmware/")

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1

TOKEN = re.compile(r"[a-z0-9]+")
# A field of a control stanza, with its continuation lines; stanzas start with
# their Package field (apt-cache dumpavail, the dpkg status file and apt's
# Translation files all write it first).
FIELD = re.compile(rb"^(Package|Section|Description|Description-md5|Description-en):[ \t]*(.*(?:\n[ \t].*)*)",
                   re.MULTILINE)


def fail(message):
    print(f"debian_sections.py: error: {message}", file=sys.stderr)
    sys.exit(1)


def note(message):
    print(f"debian_sections.py: {message}", file=sys.stderr)


np = None  # numpy, imported by main() so that --help works without it


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64-bit of one byte string (the reference the vector version matches)."""
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK64
    return h


def fnv1a64_many(strings):
    """FNV-1a 64-bit of each string's UTF-8 bytes, as a uint64 array, vectorised
    over the strings: one pass per byte position, longest strings first."""
    encoded = [s.encode("utf-8") for s in strings]
    n = len(encoded)
    if n == 0:
        return np.zeros(0, np.uint64)
    lengths = np.fromiter((len(e) for e in encoded), np.int64, count=n)
    data = np.frombuffer(b"".join(encoded), np.uint8)
    starts = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    sorted_starts = starts[order]
    h = np.full(n, FNV_OFFSET, np.uint64)
    prime = np.uint64(FNV_PRIME)
    # longer[j]: how many strings are longer than j bytes (a prefix of the order).
    longer = np.searchsorted(-sorted_lengths, -np.arange(int(sorted_lengths[0])), side="left")
    for j, k in enumerate(longer.tolist()):
        head = h[:k]
        head ^= data[sorted_starts[:k] + j].astype(np.uint64)
        head *= prime  # wraps modulo 2^64
    out = np.empty(n, np.uint64)
    out[order] = h
    return out


def run_dumpavail():
    """The output of `apt-cache dumpavail` (bytes), or None (with the reason on stderr)."""
    try:
        result = subprocess.run(["apt-cache", "dumpavail"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                check=False)
    except OSError as e:
        note(f"cannot run apt-cache dumpavail: {e.strerror}")
        return None
    if result.returncode != 0:
        reason = result.stderr.decode("utf-8", "replace").strip().splitlines()
        note(f"apt-cache dumpavail failed (exit {result.returncode})" + (f": {reason[-1]}" if reason else ""))
        return None
    return result.stdout


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")


def stanzas(data):
    """{field: bytes value} per stanza of control data (bytes), in order."""
    fields = None
    for m in FIELD.finditer(data):
        if m.group(1) == b"Package":
            if fields is not None:
                yield fields
            fields = {}
        if fields is not None:
            fields.setdefault(m.group(1), m.group(2))
    if fields is not None:
        yield fields


def description_text(value):
    """A Description field (bytes) as one string: the synopsis and the long
    text, whose " ." paragraph separators are dropped."""
    lines = value.decode("utf-8", "replace").split("\n")
    out = [lines[0].strip()]
    for line in lines[1:]:
        line = line.strip()
        if line != ".":
            out.append(line)
    return " ".join(x for x in out if x)


def parse_stanzas(data):
    """(name, section, description, description-md5) per stanza of control
    data (bytes), in order, deduplicated by name (the first stanza wins)."""
    seen = set()
    packages = []
    for fields in stanzas(data):
        name = fields[b"Package"].strip().decode("utf-8", "replace")
        if not name or name in seen:
            continue
        seen.add(name)
        description = fields.get(b"Description", fields.get(b"Description-en", b""))
        packages.append((name, fields.get(b"Section", b"").strip().decode("utf-8", "replace"),
                         description_text(description),
                         fields.get(b"Description-md5", b"").strip().decode("ascii", "replace")))
    return packages


def translations():
    """{(package, description-md5): description} from the apt lists'
    Translation-en files, when apt downloaded any (Acquire::Languages)."""
    try:
        names = sorted(f for f in os.listdir(APT_LISTS) if "_i18n_Translation-en" in f)
    except OSError:
        return {}
    table = {}
    for name in names:
        path = os.path.join(APT_LISTS, name)
        if name.endswith("Translation-en"):
            data = read_bytes(path)
        else:  # compressed: apt's helper reads every compression apt uses
            try:
                result = subprocess.run([APT_HELPER, "cat-file", path], stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, check=False)
            except OSError:
                continue
            if result.returncode != 0:
                continue
            data = result.stdout
        for fields in stanzas(data):
            key = (fields[b"Package"].strip().decode("utf-8", "replace"),
                   fields.get(b"Description-md5", b"").strip().decode("ascii", "replace"))
            if key[0] and b"Description-en" in fields:
                table.setdefault(key, description_text(fields[b"Description-en"]))
    return table


def strip_section(section):
    for prefix in SECTION_PREFIXES:
        if section.startswith(prefix):
            return section[len(prefix):]
    return section


def feature_strings(text):
    """The example's first LENGTH unigrams and bigrams, interleaved."""
    tokens = TOKEN.findall(text.lower())
    out = []
    previous = None
    for token in tokens:
        out.append(token)
        if previous is not None:
            out.append(previous + " " + token)
        if len(out) >= LENGTH:
            break
        previous = token
    return out[:LENGTH]


def main():
    parser = argparse.ArgumentParser(
        description="Write Debian package descriptions, labelled with their sections, as hashed "
        "bag-of-words ids (.npy) for configs/models/debian_bow.wgt.",
        epilog="Source: `apt-cache dumpavail`; if that fails or gives fewer than "
        f"{MIN_PACKAGES} packages, {DPKG_STATUS}. Output: train_ids.npy, test_ids.npy (float32 [N, "
        f"{LENGTH}], ids in [1, {VOCAB}), 0 = padding), train_labels.npy, test_labels.npy (int64 [N]), "
        "sections.txt (line i: the section of label i).")
    parser.add_argument("-o", "--output", default="build/data/debian_sections", metavar="DIR",
                        help="output directory, made if missing (default: %(default)s)")
    parser.add_argument("-i", "--input", metavar="FILE",
                        help="read Debian control stanzas from FILE ('-' for standard input) "
                        "instead of apt-cache dumpavail")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print the source and the examples per class on standard error")
    args = parser.parse_args()

    global np
    try:
        import numpy
    except ImportError:
        fail(f"numpy is missing for {sys.executable}; on Debian: apt-get install python3-numpy "
             "(tools/setup.sh installs it), and run this script as tools/data/debian_sections.py "
             "(its #! line names /usr/bin/python3)")
    np = numpy

    start = time.monotonic()
    if args.input:
        source = "standard input" if args.input == "-" else args.input
        data = sys.stdin.buffer.read() if args.input == "-" else read_bytes(args.input)
        packages = parse_stanzas(data)
    else:
        source = "apt-cache dumpavail"
        data = run_dumpavail()
        packages = parse_stanzas(data) if data is not None else []
        if len(packages) < MIN_PACKAGES:
            if data is not None:
                note(f"apt-cache dumpavail gave {len(packages)} packages (fewer than {MIN_PACKAGES}; "
                     "run apt-get update?)")
            note(f"falling back to {DPKG_STATUS} (installed packages only)")
            source = DPKG_STATUS
            packages = parse_stanzas(read_bytes(DPKG_STATUS))
        else:
            long_texts = translations()
            if long_texts:
                packages = [(n, s, long_texts.get((n, md5), d), md5) for n, s, d, md5 in packages]
            if args.verbose:
                found = sum(1 for n, _, _, md5 in packages if (n, md5) in long_texts)
                note(f"long descriptions from Translation-en for {found} of {len(packages)} packages")
    if not packages:
        fail(f"no package stanzas (Package: ...) in {source}")

    counts = {}
    for _, section, _, _ in packages:
        section = strip_section(section)
        if section:
            counts[section] = counts.get(section, 0) + 1
    kept = sorted(counts, key=lambda s: (-counts[s], s))[:CLASSES]
    if len(kept) < 2:
        fail(f"{source}: only {len(kept)} section(s) among {len(packages)} packages; need at least 2")
    label_of = {s: i for i, s in enumerate(kept)}

    names, labels, features = [], [], []
    for name, section, description, _ in packages:
        label = label_of.get(strip_section(section))
        if label is None:
            continue
        names.append(name)
        labels.append(label)
        features.append(feature_strings(name + " " + description))

    # Hash every distinct unigram and bigram once.
    index = {}
    flat = []
    for strings in features:
        for s in strings:
            flat.append(index.setdefault(s, len(index)))
    hashes = fnv1a64_many(list(index))
    ids_of_string = (hashes % np.uint64(VOCAB - 1) + np.uint64(1)).astype(np.int64)
    flat_ids = ids_of_string[np.asarray(flat, np.int64)] if flat else np.zeros(0, np.int64)
    n = len(names)
    ids = np.zeros((n, LENGTH), np.int64)
    lengths = np.fromiter((len(f) for f in features), np.int64, count=n)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(len(flat_ids)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    ids[rows, cols] = flat_ids

    test = (fnv1a64_many(names) % np.uint64(10)) == 0
    labels = np.asarray(labels, np.int64)
    try:
        os.makedirs(args.output, exist_ok=True)
        for split, mask in (("train", ~test), ("test", test)):
            np.save(os.path.join(args.output, f"{split}_ids.npy"), ids[mask].astype(np.float32))
            np.save(os.path.join(args.output, f"{split}_labels.npy"), labels[mask])
        with open(os.path.join(args.output, "sections.txt"), "w", encoding="utf-8") as f:
            f.write("".join(s + "\n" for s in kept))
    except OSError as e:
        fail(f"cannot write to {args.output}: {e.strerror}")

    if args.verbose:
        note(f"source: {source}, {len(packages)} packages, {len(counts)} sections, "
             f"{len(index)} distinct unigrams and bigrams")
        train_counts = np.bincount(labels[~test], minlength=len(kept))
        test_counts = np.bincount(labels[test], minlength=len(kept))
        for i, s in enumerate(kept):
            note(f"  {i:2d} {s:<12} train {train_counts[i]:6d}  test {test_counts[i]:5d}")
        note(f"ids per example: mean {lengths.mean():.1f}, {np.count_nonzero(lengths == LENGTH)} full")
    print(f"{n} examples ({int(np.count_nonzero(~test))} train, {int(np.count_nonzero(test))} test), "
          f"{len(kept)} classes, from {source}, in {time.monotonic() - start:.1f} s -> {args.output}")


if __name__ == "__main__":
    main()
