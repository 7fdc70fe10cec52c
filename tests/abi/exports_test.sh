#!/usr/bin/env bash
# exports_test.sh -- libweft.so exports the public API and nothing else.
#
# A program linked with libweft.so must be free to define any name outside weft_*: an internal
# symbol left in the dynamic table (ring_allreduce_build, net_connect, the static CUDA runtime's
# cudaMalloc...) would clash with it or interpose on weft's own calls. So every defined dynamic
# symbol must be a function declared in include/weft.h, the symbol-version node, or one of the
# few names the linker itself defines; and every function weft.h declares must be exported, so
# a declaration whose definition was dropped or hidden fails here instead of at a user's link.
# The SONAME must carry the header's major version: libweft.so.<WEFT_VERSION_MAJOR>.
#
# Usage: exports_test.sh LIBWEFT_SO WEFT_H
set -euo pipefail

lib=$1
header=$2
fail=0

# The names ld defines in every shared object; they carry no code and cannot clash with a
# program's own (a program's definitions of them are its own, the library's stay internal).
linker_names='^(_init|_fini|_edata|_end|__bss_start)$'

major=$(sed -nE 's/^#define WEFT_VERSION_MAJOR ([0-9]+).*/\1/p' "$header")
if [ -z "$major" ]; then
  echo "FAIL: no WEFT_VERSION_MAJOR in $header"
  exit 1
fi

# Functions declared in the header: a declaration starts a line with its return type, as every
# one in weft.h does ("weft_result_t weft_send(", "const char *weft_last_error(").
declared=$(grep -oE '^[A-Za-z_][A-Za-z0-9_ ]*[ *]weft_[a-z0-9_]+\(' "$header" |
  grep -oE 'weft_[a-z0-9_]+\($' | tr -d '(' | sort -u)
if [ -z "$declared" ]; then
  echo "FAIL: found no function declarations in $header"
  exit 1
fi

# Defined dynamic symbols, without their @version suffix.
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)

soname=$(readelf -d "$lib" | sed -nE 's/.*\(SONAME\).*\[(.*)\]/\1/p')
if [ "$soname" != "libweft.so.$major" ]; then
  echo "FAIL: SONAME is '${soname:-none}', want libweft.so.$major (WEFT_VERSION_MAJOR in weft.h)"
  fail=1
fi

extra=$(comm -23 <(echo "$exported") <(echo "$declared") |
  grep -vE "$linker_names" | grep -vE "^WEFT_$major\$" || true)
if [ -n "$extra" ]; then
  echo "FAIL: $(echo "$extra" | wc -l) exported symbols are not functions declared in weft.h:"
  echo "$extra" | head -40 | sed 's/^/  /'
  fail=1
fi

missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [ -n "$missing" ]; then
  echo "FAIL: declared in weft.h but not exported by $lib:"
  echo "$missing" | sed 's/^/  /'
  fail=1
fi

# Every API symbol carries the version node, so a later incompatible libweft (a new SONAME and
# node) cannot satisfy a program built against this one by accident.
unversioned=$(nm -D --defined-only --with-symbol-versions "$lib" 2>/dev/null |
  awk '$NF ~ /^weft_/ && $NF !~ /@@?WEFT_'"$major"'$/ {print $NF}')
if [ -n "$unversioned" ]; then
  echo "FAIL: API symbols without the WEFT_$major version node:"
  echo "$unversioned" | head -10 | sed 's/^/  /'
  fail=1
fi

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "PASS: $(echo "$declared" | wc -l) functions exported, nothing else; SONAME $soname"
