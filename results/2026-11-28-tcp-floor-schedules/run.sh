#!/usr/bin/env bash
# run.sh -- how fast a small all-reduce can be over loopback TCP on this host, schedule by
# schedule, beside weft and Open MPI over TCP, in rounds.
# Usage: FLOOR=path WEFT=dir MPI_BENCH=path run.sh RANKS ROUNDS OUT
#   FLOOR: gcc -O2 tools/peers/tcp_latency_floor.c; WEFT: weft-run and weft_bench (bazel build -c
#   opt); MPI_BENCH: mpicc -O2 tools/peers/mpi_bench.c.
set -euo pipefail
n=$1 rounds=$2 out=$3
mkdir -p "$out"
mpi=(mpirun --oversubscribe --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
for ((i = 1; i <= rounds; i++)); do
  for bytes in 8 4096; do
    for s in rd star tree; do "$FLOOR" "$n" $bytes 2000 $s yield; done
    "$FLOOR" "$n" $bytes 2000 rd block
  done >"$out/floor.${n}ranks.r$i.log"
  WEFT_TRANSPORT=tcp timeout 300 "$WEFT/weft-run" -n "$n" --bind none --no-prefix -- \
    "$WEFT/weft_bench" -b 8 -e 4K -n 2000 -w 50 >"$out/weft.${n}ranks.r$i.log" 2>&1
  timeout 300 "${mpi[@]}" -np "$n" "$MPI_BENCH" -b 8 -e 4K -n 2000 -w 50 \
    >"$out/ompi.${n}ranks.r$i.log" 2>&1
done
