#!/bin/bash
# ab.sh BEFORE AFTER OUT [pairs]: weft_bench all-reduce (float32 sum) with the binaries in BEFORE
# and AFTER (weft-run, weft_bench), in strict alternation, `pairs` times: 2 ranks a core each over
# shm and over TCP, 4 ranks unbound over shm; 4 KiB to 16 MiB, 20 iterations, 3 warm-up.
# One log per run: OUT/<variant>_<series>.<pair>.log.
set -u
before=$1 after=$2 out=$3 pairs=${4:-4}
mkdir -p "$out"
run() { # dir series log
  local n=2 bind=core t=shm
  case $2 in
    2tcp) t=tcp ;;
    4shm) n=4 bind=none ;;
  esac
  WEFT_TRANSPORT=$t timeout 300 "$1/weft-run" -n $n --bind $bind --no-prefix -- \
    "$1/weft_bench" -b 4K -e 16M -n 20 -w 3 >"$3" 2>&1
}
for ((p = 1; p <= pairs; p++)); do
  for s in 2shm 2tcp 4shm; do
    run "$before" $s "$out/before_$s.$p.log"
    run "$after" $s "$out/after_$s.$p.log"
  done
done
