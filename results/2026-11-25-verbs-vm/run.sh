#!/bin/bash
# Verbs between two emulated hosts: perftest's ib_write_bw against weft over verbs and over TCP,
# on the same two Soft-RoCE VMs in one boot, repetitions interleaved.
#   results/2026-11-25-verbs-vm/run.sh OUTDIR [SIZE] [REPS]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: run.sh OUTDIR [SIZE] [REPS]}; size=${2:-4194304}; reps=${3:-3}
mkdir -p "$out" results/tmp/vmbin
cp -fL .bazel/bin/tools/bench/weft-bench results/tmp/vmbin/  # a copy: .bazel/bin flips with --config
scripts/rdma-vm.sh --hosts 2 --timeout 1500 -- results/2026-11-25-verbs-vm/rank.sh "$PWD/results/tmp/vmbin" "$size" "$reps" \
  > "$out/log.txt" 2>&1
echo "rdma-vm.sh exit status $?" >> "$out/log.txt"
results/2026-11-25-verbs-vm/summarize.py "$out/log.txt" | tee "$out/table.md"
