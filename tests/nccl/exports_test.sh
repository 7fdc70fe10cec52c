#!/usr/bin/env bash
# exports_test.sh -- weft's libnccl.so.2 exports what NVIDIA's does, the way it does.
#
# Programs built against NCCL (libtorch_cuda.so imports 46 to 51 of its names, unversioned)
# must find every name of nccl/exports.txt: each as a weak ncclX (so a profiler or shim may
# interpose) and a global pncclX alias to the same code. Nothing else may be exported -- no
# weft_* and no internal helper, which would clash with a program's or with libweft.so's --
# no symbol may carry a version (NCCL's library has none, and a versioned definition would not
# match an import made against it), and the SONAME must be libnccl.so.2.
#
# Usage: exports_test.sh LIBNCCL_SO EXPORTS_TXT
set -euo pipefail

lib=$1
list=$2
fail=0

linker_names='^(_init|_fini|_edata|_end|__bss_start)$'

want=$(grep -vE '^\s*(#|$)' "$list" | sort -u)
if [ "$(echo "$want" | wc -l)" -lt 60 ]; then
  echo "FAIL: $list lists only $(echo "$want" | wc -l) names"
  exit 1
fi

soname=$(readelf -d "$lib" | sed -nE 's/.*\(SONAME\).*\[(.*)\]/\1/p')
if [ "$soname" != "libnccl.so.2" ]; then
  echo "FAIL: SONAME is '${soname:-none}', want libnccl.so.2"
  fail=1
fi

# "TYPE NAME" of every defined dynamic symbol.
syms=$(nm -D --defined-only "$lib" | awk '{print $(NF-1), $NF}')

weak=$(echo "$syms" | awk '$1 == "W" {print $2}' | sort -u)
strong=$(echo "$syms" | awk '$1 == "T" {print $2}' | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$weak"))
if [ -n "$missing" ]; then
  echo "FAIL: not exported as weak functions:"
  echo "$missing" | sed 's/^/  /'
  fail=1
fi
missing_p=$(comm -23 <(echo "$want" | sed 's/^/p/') <(echo "$strong"))
if [ -n "$missing_p" ]; then
  echo "FAIL: no global pncclX alias for:"
  echo "$missing_p" | sed 's/^/  /'
  fail=1
fi

# Each ncclX and its pncclX are the same code.
mismatched=$(nm -D --defined-only "$lib" | awk '{addr[$NF] = $1}
  END {for (n in addr) if (n ~ /^nccl/ && addr["p" n] != addr[n]) print n}')
if [ -n "$mismatched" ]; then
  echo "FAIL: ncclX and pncclX at different addresses:"
  echo "$mismatched" | sed 's/^/  /'
  fail=1
fi

allowed=$( (echo "$want"; echo "$want" | sed 's/^/p/') | sort -u)
extra=$(echo "$syms" | awk '{print $2}' | sort -u | comm -23 - <(echo "$allowed") |
  grep -vE "$linker_names" || true)
if [ -n "$extra" ]; then
  echo "FAIL: $(echo "$extra" | wc -l) exported symbols are not in $list:"
  echo "$extra" | head -40 | sed 's/^/  /'
  fail=1
fi

versioned=$(nm -D --defined-only --with-symbol-versions "$lib" | awk '$NF ~ /@/ {print $NF}')
if [ -n "$versioned" ]; then
  echo "FAIL: symbols carry versions (NCCL's carry none):"
  echo "$versioned" | head -10 | sed 's/^/  /'
  fail=1
fi

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "PASS: $(echo "$want" | wc -l) names exported weak with their pncclX aliases, nothing" \
  "else, no versions; SONAME $soname"
