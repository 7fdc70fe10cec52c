#!/usr/bin/env bash
# monitor.sh -- short 2-rank all-reduces of 4 MiB over shared memory, back to back for a few
# minutes, to see how this host's speed moves from second to second.
# Usage: monitor.sh MODE SECONDS > OUT
#   MODE alternating: weft (HEAD), weft with WEFT_SPIN_US=0, weft built with a PAUSE in its busy
#        poll (PAUSE_BIN), Open MPI (mpi_bench), in turn;
#   MODE per-core: weft, memcpy on core 0, memcpy on core 1, shm_floor 2 ranks, weft.
# HEAD_BIN and PAUSE_BIN hold weft-run and weft_bench (bazel build -c opt); MPI_BENCH is
# mpicc -O2 tools/peers/mpi_bench.c; MEMCPY_BW and SHM_FLOOR are tools/peers' (gcc -O2 / -O3).
set -u
mode=$1 secs=$2
w() { WEFT_TRANSPORT=shm timeout 60 "$@" 2>/dev/null | awk 'NF==6 && $1 ~ /^[0-9]+$/ {print $5}'; }
weft() { w "$1/weft-run" -n 2 --bind core --no-prefix -- "$1/weft_bench" -b 4M -e 4M -n 50 -w 3; }
end=$((SECONDS + secs))
while [ $SECONDS -lt "$end" ]; do
  if [ "$mode" = alternating ]; then
    printf "%s head %s " "$(date +%T)" "$(weft "$HEAD_BIN")"
    printf "spin0 %s " "$(WEFT_SPIN_US=0 weft "$HEAD_BIN")"
    printf "pause %s " "$(weft "$PAUSE_BIN")"
    printf "ompi %s\n" "$(timeout 60 mpirun --allow-run-as-root -np 2 "$MPI_BENCH" -b 4M -e 4M -n 50 -w 3 |
      awk 'NF==6 && $1 ~ /^[0-9]+$/ {print $5}')"
  else
    printf "%s head %s " "$(date +%T)" "$(weft "$HEAD_BIN")"
    printf "mc0 %s mc1 %s " "$(taskset -c 0 "$MEMCPY_BW" | awk '{print $2}')" \
      "$(taskset -c 1 "$MEMCPY_BW" | awk '{print $2}')"
    printf "floor2 %s " "$("$SHM_FLOOR" 2 4M 5 | awk '{print $2}')"
    printf "head %s\n" "$(weft "$HEAD_BIN")"
  fi
done
