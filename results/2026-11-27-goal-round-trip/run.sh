#!/usr/bin/env bash
# run.sh -- weft schedules through LogGOPSim: exports each call with weft-sim-goal, runs it in
# LogGOPSim with the matching LogGP parameters and prints weft-sim's and LogGOPSim's times as a
# markdown table. Usage: [GAMMA=s/B] run.sh WEFT_SIM_GOAL TXT2BIN LOGGOPSIM [WORKDIR]
set -euo pipefail
goal=$1 txt2bin=$2 loggopsim=$3 work=${4:-$(mktemp -d)}
mkdir -p "$work"
model=(--alpha 5e-6 --beta 1e-10 --gamma "${GAMMA:-2e-10}")
echo "| collective | algorithm | ranks | bytes | slices | call desc. | sends | weft-sim (us) | LogGOPSim (us) | LogGOPSim / weft-sim |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for coll_algo in all_reduce:ring all_reduce:recursive_doubling all_reduce:rabenseifner all_gather:ring; do
  coll=${coll_algo%%:*} algo=${coll_algo##*:}
  for p in 8 64; do
    for bytes in 4K 1M; do
      for variant in whole sliced; do
        if [ $variant = whole ]; then flags=(--slice 1G --no-header); else flags=(--slice 64K); fi
        f=$work/$coll-$algo-$p-$bytes-$variant
        out=$("$goal" "$f.goal" -C "$coll" -A "$algo" -p "$p" -b "$bytes" "${model[@]}" "${flags[@]}")
        sends=$(sed -n 's/.*: \([0-9]*\) sends.*/\1/p' <<<"$out")
        weft_ps=$(sed -n 's/^weft-sim: \([0-9]*\) ps.*/\1/p' <<<"$out")
        read -r -a params <<<"$(sed -n 's/^LogGOPSim: //p' <<<"$out")"
        "$txt2bin" -i "$f.goal" -o "$f.bin" >/dev/null
        # Small runs list every host's end, large ones the latest: the call ends with the last.
        lgs_ps=$("$loggopsim" -f "$f.bin" "${params[@]}" |
          awk '/^Host [0-9]+:/ {if ($3 > m) m = $3} /^Maximum finishing time/ {m = $7} END {print m}')
        awk -v c="$coll" -v a="$algo" -v p="$p" -v b="$bytes" -v v="$variant" -v s="$sends" \
          -v w="$weft_ps" -v l="$lgs_ps" 'BEGIN {
            printf "| %s | %s | %d | %s | %s | %s | %d | %.3f | %.3f | %.4f |\n", c, a, p, b,
              v == "whole" ? "one per op" : "64 KiB", v == "whole" ? "off" : "on", s,
              w / 1e6, l / 1e6, l / w }'
      done
    done
  done
done
