#!/bin/bash
# weft_sim_test.sh -- the weft-sim binary end to end: a table, -A all, and the errors' exit codes.
set -u
sim="$1"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$sim" -C all_reduce -A ring -p 8 --ranks-per-node 4 -b 8 -e 1G -f 2 --alpha 5e-6 \
      --beta 1e-10 --gamma 2e-10 --inter-alpha 2e-5 --inter-beta 1e-9) || fail "run: $out"
rows=$(grep -c ' float32 ' <<<"$out")
[ "$rows" -eq 28 ] || fail "expected 28 rows (8 B .. 1 GiB), got $rows: $out"
grep -q 'busbw' <<<"$out" || fail "no busbw column: $out"

out=$("$sim" -A all -C broadcast -b 1M -e 1M) || fail "-A all: $out"
grep -q ' ring ' <<<"$out" || fail "-A all printed no ring row: $out"

out=$("$sim" -C all_reduce -A dissemination 2>&1)
[ $? -eq 2 ] || fail "unsupported pair should exit 2"
grep -q "supported: ring" <<<"$out" || fail "unsupported pair should list what exists: $out"

out=$("$sim" -C send -p 4 -b 4K -e 4K) || fail "send: $out"
grep -q 'N/A' <<<"$out" || fail "send has no closed form, expected N/A: $out"
# --trace names what the receiving op does with each message: a ring all-reduce shows its fused
# steps (reduced or copied straight into the next peer's slot), and no plain reduce.
out=$("$sim" -C all_reduce -A ring -p 4 -b 1M -e 1M --trace) || fail "--trace: $out"
for step in desc recv-reduce-send recv-reduce-copy-send recv-copy-send recv-copy; do
  grep -q " us  $step\$" <<<"$out" || fail "--trace shows no $step message: $out"
done
! grep -q " us  recv-reduce\$" <<<"$out" || fail "a fused ring has no plain recv-reduce: $out"
# --replay auto (the default) prints the full replay's table, character for character.
for coll in all_reduce all_gather all_to_all; do
  args=(-C "$coll" -A all -p 16 --ranks-per-node 4 --inter-alpha 9e-5 -b 1K -e 4M -f 4)
  full=$("$sim" "${args[@]}" --replay full) || fail "--replay full: $full"
  auto=$("$sim" "${args[@]}") || fail "--replay auto: $auto"
  [ "$full" == "$auto" ] || fail "$coll: --replay auto differs from full: $auto vs $full"
done
out=$("$sim" --replay half 2>&1)
[ $? -eq 2 ] || fail "--replay half should exit 2"
grep -q "unknown replay 'half'" <<<"$out" || fail "--replay half should be named: $out"
# --skip off replays every slice; the default jumps over the periodic middle: the same table.
on=$("$sim" -C all_reduce -A recursive_doubling -p 8 -b 4M -e 4M --slice 4K) || fail "skip: $on"
off=$("$sim" -C all_reduce -A recursive_doubling -p 8 -b 4M -e 4M --slice 4K --skip off) ||
  fail "--skip off: $off"
[ "$on" == "$off" ] || fail "--skip on and off differ: $on / $off"
"$sim" --help | grep -q -- "--skip on|off" || fail "--help does not list --skip"
# -j: rows run on worker threads print what one thread prints, in the same order; a failed row
# stops the run with its message, after the rows before it.
args=(-C all_reduce -A all -p 12 -b 1K -e 16M -f 4 --slice 16K)
one=$("$sim" "${args[@]}" -j 1) || fail "-j 1: $one"
four=$("$sim" "${args[@]}" -j 4) || fail "-j 4: $four"
[ "$one" == "$four" ] || fail "-j 4 differs from -j 1: $four vs $one"
out=$("$sim" -j 0 2>&1)
[ $? -eq 2 ] || fail "-j 0 should exit 2: $out"
# --replay estimate: a long tree is marked as estimated under its row; a symmetric ring is not,
# and prints what auto prints.
est=$("$sim" -C all_reduce -A tree -p 16 -b 64K -e 16M -f 16 --slice 4K --replay estimate \
      --estimate-slices 32) || fail "--replay estimate: $est"
marks=$(grep -c '^#   ^ estimated from replays of 131072 and 262144 bytes' <<<"$est")
[ "$marks" -eq 2 ] || fail "expected 2 estimated rows (1 MiB, 16 MiB), got $marks: $est"
auto=$("$sim" -C all_reduce -A ring -p 16 -b 64K -e 16M -f 16 --slice 4K) || fail "ring: $auto"
est=$("$sim" -C all_reduce -A ring -p 16 -b 64K -e 16M -f 16 --slice 4K --replay estimate \
      --estimate-slices 32) || fail "ring estimate: $est"
[ "$auto" == "$est" ] || fail "a symmetric ring was estimated: $est vs $auto"
"$sim" --help | grep -q -- "--replay full|auto|estimate" || fail "--help does not list estimate"
echo PASS
