#!/usr/bin/env bash
# abi_test.sh -- weft's nccl/nccl.h has NCCL's ABI: one probe (abi_probe.c) compiled against it
# and against NVIDIA's nccl.h must print the same sizes, offsets and values; what NVIDIA's header
# is too old to have (it is 2.28 where CUDA 13 ships it) is checked against the published facts:
# ncclConfig_t is 88 bytes in 2.29 (graphUsageMode and numRmaCtx at 80 and 84) and 96 in 2.30.
#
# Usage: abi_test.sh WEFT_NCCL_H NVIDIA_NCCL_H [CUDA_INCLUDE_DIR]
# Skips (exit 0, saying so) where NVIDIA's header or a C compiler is absent.
set -euo pipefail

weft_h=$1
nvidia_h=$2
cuda_inc=${3:-$(dirname "$nvidia_h")}
probe=$(dirname "$0")/abi_probe.c
cc=${CC:-cc}

if ! command -v "$cc" >/dev/null; then
  echo "SKIP: no C compiler ($cc) to build the probe"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each header alone in a folder of its own, so that "nccl.h" means that one.
mkdir -p "$tmp/weft" "$tmp/nvidia"
cp "$weft_h" "$tmp/weft/nccl.h"
"$cc" -std=c11 -Wall -Werror -I"$tmp/weft" "$probe" -o "$tmp/probe_weft"
"$tmp/probe_weft" >"$tmp/weft.txt"

fail=0
expect() {  # line
  if ! grep -qxF "$1" "$tmp/weft.txt"; then
    echo "FAIL: weft's header: want '$1', got '$(grep -F "${1% *}" "$tmp/weft.txt" || echo nothing)'"
    fail=1
  fi
}
expect "weft sizeof ncclConfig_t 96"
expect "weft config.size 96"
expect "weft config.version 23007"
expect "weft offset ncclConfig_t.graphUsageMode 80"
expect "weft offset ncclConfig_t.numRmaCtx 84"
expect "weft config.numRmaCtx -2147483648"
expect "weft sizeof ncclWaitSignalDesc_t 16"
expect "weft value NCCL_API_MAGIC 3405692655"
expect "weft value NCCL_VERSION_CODE 23007"
expect "sizeof ncclUniqueId 128"

if [ ! -f "$nvidia_h" ]; then
  echo "SKIP: $nvidia_h is absent, so only weft's own facts were checked (fail=$fail)"
  exit $fail
fi
cp "$nvidia_h" "$tmp/nvidia/nccl.h"
"$cc" -std=c11 -w -I"$tmp/nvidia" -I"$cuda_inc" "$probe" -o "$tmp/probe_nvidia"
"$tmp/probe_nvidia" >"$tmp/nvidia.txt"

grep -v '^weft ' "$tmp/weft.txt" >"$tmp/weft_common.txt"
if ! diff -u "$tmp/nvidia.txt" "$tmp/weft_common.txt" >"$tmp/diff.txt"; then
  echo "FAIL: weft's nccl.h differs from $nvidia_h (- NVIDIA, + weft):"
  cat "$tmp/diff.txt"
  fail=1
fi
if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "PASS: $(wc -l <"$tmp/nvidia.txt") sizes, offsets and values as in $nvidia_h;" \
  "$(grep -c '^weft ' "$tmp/weft.txt") later facts as published"
