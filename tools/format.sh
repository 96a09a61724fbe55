#!/usr/bin/env bash
# The house format (.clang-format, clang-format 14 from Debian's
# clang-format package) over every C, C++, CUDA and HIP source the
# repository tracks, and new ones not yet added.
#
#   tools/format.sh           rewrite the files in place
#   tools/format.sh --check   change nothing; list each file clang-format
#                             would rewrite, with the first differences,
#                             and exit 1 if there is any (CI runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
format=${CLANG_FORMAT:-clang-format}
command -v "$format" >/dev/null || { echo "format.sh: $format not found (apt-get install clang-format)"; exit 2; }

# Tracked files and new ones not yet added (but not ignored ones), so that a
# file is formatted and checked before its first commit.
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.c' '*.cc' '*.h' '*.cu' '*.hip' | grep -v '^tests/fixtures/')
if [ "${1:-}" != "--check" ]; then
  printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 20 "$format" -i
  exit 0
fi

# clang-format's own check, in parallel: a warning per unformatted file.
report=$(printf '%s\0' "${files[@]}" | xargs -0 -P "$(nproc)" -n 20 "$format" --dry-run -Werror 2>&1 >/dev/null) \
  && { echo "format.sh: ${#files[@]} files formatted as .clang-format says"; exit 0; }
mapfile -t bad < <(echo "$report" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
[ ${#bad[@]} -gt 0 ] || { echo "$report"; echo "format.sh: clang-format failed"; exit 2; }
for f in "${bad[@]}"; do
  echo "not formatted: $f"
  "$format" "$f" | diff -u "$f" - | sed -n '3,12p' | sed 's/^/    /'
done
echo "format.sh: ${#bad[@]} of ${#files[@]} files differ from .clang-format; run tools/format.sh and commit the result"
exit 1
