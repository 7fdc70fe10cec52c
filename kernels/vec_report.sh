#!/bin/bash
# vec_report.sh -- lists, one line per loop, which kernels/ loops gcc vectorizes at -O3 (no -march).
# Covers the one-destination loops (reduce_*, avg_final_*, scale_*) and the two-destination
# reduce-copy loops (reduce_copy_*, avg_final_copy_*), with a count per family after each file.
#
# The loops are expanded from macros, so gcc reports every one of them at the macro's line.
# Preprocessing and reformatting first gives each function its own lines, which are then matched
# to gcc's -fopt-info-vec-optimized messages. Run from anywhere; extra arguments go to gcc (e.g.
# -mavx2 to see what a wider ISA would add). Needs gcc and clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for src in kernels/reduce.c kernels/avg.c; do
  pre="$tmp/$(basename "$src")"
  gcc -E -P -std=c11 -D_GNU_SOURCE -I. "$src" | clang-format --style=file --assume-filename=x.c >"$pre"
  gcc -O3 -std=c11 -D_GNU_SOURCE -I. "$@" -fopt-info-vec-optimized -c "$pre" -o /dev/null 2>&1 |
    sed -n 's/.*:\([0-9]*\):[0-9]*: optimized: loop vectorized using \([0-9]*\) byte.*/\1 \2/p' \
      >"$tmp/vec"
  awk 'NR == FNR { bytes[$1] = bytes[$1] (bytes[$1] == "" ? "" : "+") $2; next }
       /^static void [a-z0-9_]+\(/ { cur = $3; sub(/\(.*/, "", cur); names[++n] = cur }
       FNR in bytes && cur != "" { got[cur] = got[cur] (got[cur] == "" ? "" : "+") bytes[FNR] }
       END {
         for (i = 1; i <= n; i++) {
           v = got[names[i]]
           printf "%-28s %s\n", names[i], v == "" ? "NOT vectorized" : "vectorized (" v " byte vectors)"
           fam = names[i] ~ /_copy_/ ? "two-destination (copy)" : "one-destination"
           total[fam]++
           if (v != "") vec[fam]++
         }
         split("one-destination,two-destination (copy)", fams, ",")
         for (f = 1; f <= 2; f++) {
           if (total[fams[f]]) {
             printf "%s: %d of %d %s loops vectorized\n", src, vec[fams[f]], total[fams[f]], fams[f]
           }
         }
       }' src="$src" "$tmp/vec" "$pre"
done
