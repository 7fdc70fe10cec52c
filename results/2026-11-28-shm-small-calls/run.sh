#!/usr/bin/env bash
# run.sh -- small all-reduces side by side, alternating, 3 runs: weft before and after over shm
# (2 and 4 ranks, and 2 ranks pinned one per core as Open MPI binds them), Open MPI with its
# defaults (shared memory), weft before and after over TCP; then 12 short 8-byte runs of each
# weft at 2 ranks, to count how often the two ranks end up sharing one core.
# Usage: run.sh BIN OUT, where BIN holds weft-run, before/weft_bench, after/weft_bench
# (tools/peers, bazel build -c opt) and mpi_bench (mpicc -O2 tools/peers/mpi_bench.c).
set -u
L=$1 O=$2
mkdir -p "$O"
sweep=(-b 8 -e 64K -n 2000 -w 3)
printf '#!/bin/sh\nexec taskset -c $((RANK %% 2)) "$@"\n' >"$O/pin.sh"
chmod +x "$O/pin.sh"
{ date -Is; uptime; } >"$O/env.txt"
for rep in 1 2 3; do
  for n in 2 4; do
    for v in before after; do
      WEFT_TRANSPORT=shm timeout 300 "$L/weft-run" -n $n --no-prefix -- "$L/$v/weft_bench" \
        "${sweep[@]}" >"$O/weft-$v-shm-$n-$rep.log" 2>&1
      if [ $n = 2 ]; then
        WEFT_TRANSPORT=shm timeout 300 "$L/weft-run" -n $n --no-prefix -- "$O/pin.sh" \
          "$L/$v/weft_bench" "${sweep[@]}" >"$O/pinned-$v-shm-$n-$rep.log" 2>&1
      fi
      WEFT_TRANSPORT=tcp timeout 300 "$L/weft-run" -n $n --no-prefix -- "$L/$v/weft_bench" \
        -b 8 -e 64K -n 100 -w 3 >"$O/weft-$v-tcp-$n-$rep.log" 2>&1
    done
    timeout 300 mpirun --oversubscribe --allow-run-as-root -np $n "$L/mpi_bench" "${sweep[@]}" \
      >"$O/mpi-shm-$n-$rep.log" 2>&1
    uptime >>"$O/env.txt"
  done
done
for rep in $(seq 1 12); do
  for v in before after; do
    WEFT_TRANSPORT=shm timeout 300 "$L/weft-run" -n 2 --no-prefix -- "$L/$v/weft_bench" \
      -b 8 -e 8 -n 500 -w 3 >"$O/short-$v-$rep.log" 2>&1
  done
done
uptime >>"$O/env.txt"
