#!/usr/bin/env bash
# ab.sh -- weft over TCP before and after this change, beside Open MPI over TCP and Gloo, in
# rounds: each round runs every series once, in an order that rotates from round to round, so a
# slow phase of the host (results/2026-11-28-cross-core-phases) falls on every series alike.
# Usage: BEFORE=dir AFTER=dir PEERS=dir ab.sh RANKS MIN MAX ROUNDS OUT
#   BEFORE/AFTER hold weft-run and weft_bench (bazel build -c opt) of the two commits; PEERS holds
#   mpi_bench and gloo_bench (built as scripts/compare.sh builds them).
set -euo pipefail
n=$1 min=$2 max=$3 rounds=$4 out=$5
mkdir -p "$out"
bind=none
[ "$n" -le "$(nproc)" ] && bind=core
mpi=(mpirun --oversubscribe --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
sweep=(-b "$min" -e "$max" -n 20 -w 3)
series=(before after mpi-tcp gloo)
run() {  # series log
  case $1 in
    before | after)
      local d=$BEFORE
      [ "$1" = after ] && d=$AFTER
      WEFT_TRANSPORT=tcp timeout 300 "$d/weft-run" -n "$n" --bind $bind --no-prefix -- \
        "$d/weft_bench" "${sweep[@]}" ;;
    mpi-tcp) timeout 300 "${mpi[@]}" -np "$n" "$PEERS/mpi_bench" "${sweep[@]}" ;;
    gloo)
      local store pids=() r
      store=$(mktemp -d)
      for ((r = 0; r < n; r++)); do
        RANK=$r WORLD_SIZE=$n GLOO_STORE_DIR=$store timeout 300 "$PEERS/gloo_bench" "${sweep[@]}" \
          >"$store.$r.log" 2>&1 & pids+=($!)
      done
      for r in "${pids[@]}"; do wait "$r"; done
      cat "$store".*.log
      rm -rf "$store" "$store".*.log ;;
  esac >"$2" 2>&1 || echo "# FAILED" >>"$2"
}
for ((i = 1; i <= rounds; i++)); do
  for ((k = 0; k < ${#series[@]}; k++)); do
    s=${series[$(((k + i) % ${#series[@]}))]}
    run "$s" "$out/$s.${n}ranks.r$i.log"
  done
done
