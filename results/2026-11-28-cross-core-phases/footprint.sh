#!/usr/bin/env bash
# footprint.sh -- as slices.sh, but every variant keeps the ring's footprint at the default's
# 2 MiB (WEFT_SHM_SLOTS x WEFT_SLICE_BYTES): 32 x 64 KiB, 8 x 256 KiB, 4 x 512 KiB; then Open MPI.
# Usage: footprint.sh SECONDS > OUT   (HEAD_BIN and MPI_BENCH as in monitor.sh)
set -u
w() { WEFT_TRANSPORT=shm timeout 60 "$@" 2>/dev/null | awk 'NF==6 && $1 ~ /^[0-9]+$/ {print $5}'; }
weft() { w "$HEAD_BIN/weft-run" -n 2 --bind core --no-prefix -- "$HEAD_BIN/weft_bench" -b 4M -e 4M -n 50 -w 3; }
end=$((SECONDS + $1))
while [ $SECONDS -lt "$end" ]; do
  printf "%s s64k %s " "$(date +%T)" "$(weft)"
  printf "8x256k %s " "$(WEFT_SHM_SLOTS=8 WEFT_SLICE_BYTES=262144 weft)"
  printf "4x512k %s " "$(WEFT_SHM_SLOTS=4 WEFT_SLICE_BYTES=524288 weft)"
  printf "ompi %s\n" "$(timeout 60 mpirun --allow-run-as-root -np 2 "$MPI_BENCH" -b 4M -e 4M -n 50 -w 3 |
    awk 'NF==6 && $1 ~ /^[0-9]+$/ {print $5}')"
done
