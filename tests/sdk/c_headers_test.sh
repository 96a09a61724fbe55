#!/usr/bin/env bash
# Every SDK C header compiles on its own, as strict C99 and as C++20, with
# warnings as errors; a C file using the struct macros compiles too; and
# every C++ helper header compiles on its own as C++17 and C++20.
# Usage: c_headers_test.sh <sdk include dir> <C compiler> <C++ compiler>
set -euo pipefail
include_dir=$1
cc=$2
cxx=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=0
headers=("$include_dir"/weft/*.h)
[ ${#headers[@]} -ge 8 ] || { echo "expected at least 8 SDK headers, found ${#headers[@]}"; exit 1; }
for header in "${headers[@]}"; do
  name=$(basename "$header")
  printf '#include "weft/%s"\n#include "weft/%s"\nint weft_probe(void) { return 0; }\n' "$name" "$name" \
    > "$work/alone.c"
  if ! "$cc" -std=c99 -Wall -Wextra -Werror -pedantic -I"$include_dir" -c "$work/alone.c" \
       -o "$work/alone.o"; then
    echo "FAIL: weft/$name does not compile alone as C99"; failed=1
  fi
  cp "$work/alone.c" "$work/alone.cc"
  if ! "$cxx" -std=c++20 -Wall -Wextra -Werror -pedantic -I"$include_dir" -c "$work/alone.cc" \
       -o "$work/alone_cc.o"; then
    echo "FAIL: weft/$name does not compile alone as C++20"; failed=1
  fi
done

cat > "$work/use.c" <<'C'
#include "weft/weft_plugin.h"
/* The macros a C plugin relies on, used the way it would. */
int weft_probe(const weft_device_properties_t* props, const weft_kernel_def_t* defs, size_t n) {
  int total = 0;
  size_t i;
  if (WEFT_STRUCT_HAS(props, weft_device_properties_t, num_extra)) total += (int)props->num_extra;
  for (i = 0; i < n; ++i) total += (int)WEFT_ARRAY_AT(weft_kernel_def_t, defs, i)->flags;
  total += (int)weft_dtype_size(WEFT_DTYPE_F64) + (weft_code_name(WEFT_DATA_LOSS)[0] == 'D');
  return total + (int)WEFT_DEVICE_PLUGIN_SIZE_V1_0 + (int)WEFT_HOST_SIZE_V1_0;
}
C
if ! "$cc" -std=c99 -Wall -Wextra -Werror -pedantic -I"$include_dir" -c "$work/use.c" -o "$work/use.o"; then
  echo "FAIL: the SDK macros do not compile in C99 code"; failed=1
fi

# The C++ helpers (weft/sdk/*.h) promise C++17: each compiles alone as
# C++17 and as C++20, twice in one file (include guards).
helpers=("$include_dir"/weft/sdk/*.h)
[ ${#helpers[@]} -ge 10 ] || { echo "expected at least 10 SDK C++ headers, found ${#helpers[@]}"; exit 1; }
for header in "${helpers[@]}"; do
  name=$(basename "$header")
  printf '#include "weft/sdk/%s"
#include "weft/sdk/%s"
int weft_probe() { return 0; }
' "$name" "$name" \
    > "$work/helper.cc"
  for std in c++17 c++20; do
    if ! "$cxx" -std=$std -Wall -Wextra -Wshadow -Werror -pedantic -I"$include_dir" -c "$work/helper.cc" \
         -o "$work/helper.o"; then
      echo "FAIL: weft/sdk/$name does not compile alone as $std"; failed=1
    fi
  done
done

if [ "$failed" -ne 0 ]; then exit 1; fi
echo "OK: ${#headers[@]} headers compile alone as C99 and C++20, ${#helpers[@]} C++ helpers as C++17 and C++20," \
  "with -Wall -Wextra -Werror -pedantic"
