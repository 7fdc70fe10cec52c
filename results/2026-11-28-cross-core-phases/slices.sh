#!/usr/bin/env bash
# slices.sh -- as monitor.sh: rounds of 2-rank 4 MiB all-reduces over shm, weft with 64 KiB
# (default), 256 KiB and 1 MiB slices, weft with the single-copy knob, Open MPI, in turn.
# Usage: slices.sh SECONDS > OUT   (HEAD_BIN and MPI_BENCH as in monitor.sh)
set -u
w() { WEFT_TRANSPORT=shm timeout 60 "$@" 2>/dev/null | awk 'NF==6 && $1 ~ /^[0-9]+$/ {print $5}'; }
weft() { w "$HEAD_BIN/weft-run" -n 2 --bind core --no-prefix -- "$HEAD_BIN/weft_bench" -b 4M -e 4M -n 50 -w 3; }
end=$((SECONDS + $1))
while [ $SECONDS -lt "$end" ]; do
  printf "%s head %s " "$(date +%T)" "$(weft)"
  printf "s256k %s " "$(WEFT_SLICE_BYTES=262144 weft)"
  printf "s1m %s " "$(WEFT_SLICE_BYTES=1048576 weft)"
  printf "cma %s " "$(WEFT_SHM_SINGLE_COPY_BYTES=65536 weft)"
  printf "ompi %s\n" "$(timeout 60 mpirun --allow-run-as-root -np 2 "$MPI_BENCH" -b 4M -e 4M -n 50 -w 3 |
    awk 'NF==6 && $1 ~ /^[0-9]+$/ {print $5}')"
done
