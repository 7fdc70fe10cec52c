#!/usr/bin/env bash
# run.sh -- small all-reduces side by side: weft before and after (shm, tcp; blocking and
# PEER_ASYNC=1), Open MPI (its default shared memory, and ob1/tcp over lo) and Gloo, alternating,
# 3 runs. Usage: run.sh BIN OUT, where BIN holds weft-run, before/weft_bench, after/weft_bench,
# mpi_bench and gloo_bench (tools/peers, built as scripts/compare.sh builds them).
set -u
L=$1 O=$2
mkdir -p "$O"
sweep=(-b 8 -e 64K -n 200 -w 3)
{ date -Is; uptime; } >"$O/env.txt"
for rep in 1 2 3; do
  for n in 2 4; do
    for v in before after; do
      for t in shm tcp; do
        WEFT_TRANSPORT=$t timeout 300 "$L/weft-run" -n $n --no-prefix -- "$L/$v/weft_bench" "${sweep[@]}" \
          >"$O/weft-$v-$t-$n-$rep.log" 2>&1
        PEER_ASYNC=1 WEFT_TRANSPORT=$t timeout 300 "$L/weft-run" -n $n --no-prefix -- "$L/$v/weft_bench" \
          -b 8 -e 4K -n 200 -w 3 >"$O/async-$v-$t-$n-$rep.log" 2>&1
      done
    done
    timeout 300 mpirun --oversubscribe --allow-run-as-root -np $n "$L/mpi_bench" "${sweep[@]}" \
      >"$O/mpi-shm-$n-$rep.log" 2>&1
    timeout 300 mpirun --oversubscribe --allow-run-as-root --mca pml ob1 --mca btl tcp,self \
      --mca btl_tcp_if_include lo -np $n "$L/mpi_bench" "${sweep[@]}" >"$O/mpi-tcp-$n-$rep.log" 2>&1
    store=$(mktemp -d)
    pids=()
    for ((r = 0; r < n; r++)); do
      RANK=$r WORLD_SIZE=$n GLOO_STORE_DIR=$store timeout 300 "$L/gloo_bench" "${sweep[@]}" \
        >"$O/gloo-$n-$rep.r$r.log" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    rm -rf "$store"
    uptime >>"$O/env.txt"
  done
done
