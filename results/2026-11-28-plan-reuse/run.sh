#!/usr/bin/env bash
# run.sh -- a small all-reduce over shm, weft before and after a change and Open MPI with its
# defaults, in rounds whose order rotates, so a slow phase of the host falls on every series alike.
# Usage: BEFORE=dir AFTER=dir MPI_BENCH=path run.sh RANKS ROUNDS OUT
#   BEFORE/AFTER hold weft-run and weft_bench (bazel build -c opt //tools:weft-run
#   //tools/peers:weft_bench) of the two commits; MPI_BENCH is mpicc -O2 tools/peers/mpi_bench.c.
set -euo pipefail
n=$1 rounds=$2 out=$3
mkdir -p "$out"
bind=none
[ "$n" -le "$(nproc)" ] && bind=core
mpi=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
sweep=(-b 8 -e 4K -n 2000 -w 50)
series=(before after ompi)
for ((i = 1; i <= rounds; i++)); do
  for ((k = 0; k < 3; k++)); do
    s=${series[$(((k + i) % 3))]}
    case $s in
      before | after)
        d=$BEFORE
        [ "$s" = after ] && d=$AFTER
        WEFT_TRANSPORT=shm timeout 300 "$d/weft-run" -n "$n" --bind $bind --no-prefix -- \
          "$d/weft_bench" "${sweep[@]}" ;;
      ompi) timeout 300 "${mpi[@]}" -np "$n" "$MPI_BENCH" "${sweep[@]}" ;;
    esac >"$out/$s.${n}ranks.r$i.log" 2>&1 || echo "# FAILED" >>"$out/$s.${n}ranks.r$i.log"
  done
done
