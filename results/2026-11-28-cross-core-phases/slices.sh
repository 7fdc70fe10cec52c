#!/usr/bin/env bash
# slices.sh -- as monitor.sh: rounds of 2-rank 4 MiB all-reduces over shm, weft with other shm
# rings, then Open MPI, in turn.
# Usage: slices.sh MODE SECONDS > OUT   (HEAD_BIN and MPI_BENCH as in monitor.sh)
#   MODE slots: 32 slots of 64 KiB (default), 256 KiB and 1 MiB, and the single-copy knob on;
#   MODE footprint: every ring 2 MiB: 32 x 64 KiB, 8 x 256 KiB, 4 x 512 KiB.
set -u
mode=$1
w() { WEFT_TRANSPORT=shm timeout 60 "$@" 2>/dev/null | awk 'NF==6 && $1 ~ /^[0-9]+$/ {print $5}'; }
weft() { w "$HEAD_BIN/weft-run" -n 2 --bind core --no-prefix -- "$HEAD_BIN/weft_bench" -b 4M -e 4M -n 50 -w 3; }
if [ "$mode" = slots ]; then
  variants=("head" "s256k WEFT_SLICE_BYTES=262144" "s1m WEFT_SLICE_BYTES=1048576"
            "cma WEFT_SHM_SINGLE_COPY_BYTES=65536")
else
  variants=("s64k" "8x256k WEFT_SHM_SLOTS=8 WEFT_SLICE_BYTES=262144"
            "4x512k WEFT_SHM_SLOTS=4 WEFT_SLICE_BYTES=524288")
fi
end=$((SECONDS + $2))
while [ $SECONDS -lt "$end" ]; do
  printf "%s " "$(date +%T)"
  for v in "${variants[@]}"; do
    read -r name settings <<<"$v"
    printf "%s %s " "$name" "$(for kv in $settings; do export "$kv"; done; weft)"
  done
  printf "ompi %s\n" "$(timeout 60 mpirun --allow-run-as-root -np 2 "$MPI_BENCH" -b 4M -e 4M -n 50 -w 3 |
    awk 'NF==6 && $1 ~ /^[0-9]+$/ {print $5}')"
done
