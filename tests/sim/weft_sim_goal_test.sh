#!/bin/bash
# weft_sim_goal_test.sh -- the weft-sim-goal binary end to end: a GOAL file, its summary, the
# LogGOPSim parameters, and the errors' exit codes.
set -u
goal="$1"
fail() { echo "FAIL: $*"; exit 1; }
dir=${TEST_TMPDIR:-$(mktemp -d)}

# Unsliced ring all-reduce, 4 ranks, 4 KiB: 2(p-1) sends and receives per rank, p-1 reductions.
out=$("$goal" "$dir/ar.goal" -C all_reduce -A ring -p 4 -b 4K --slice 1G --no-header \
      --alpha 5e-6 --beta 1e-10 --gamma 2e-10) || fail "run: $out"
grep -q '24 sends, 24 recvs, 12 calcs' <<<"$out" || fail "summary: $out"
grep -q '^weft-sim: [0-9]* ps (24 messages)$' <<<"$out" || fail "weft-sim's time: $out"
grep -q '^LogGOPSim: -L 5000000 -o 0 -g 5000000 -G 100 -O 0 -S 2147483647$' <<<"$out" ||
  fail "LogGOPSim parameters: $out"
grep -q '^num_ranks 4$' "$dir/ar.goal" || fail "no num_ranks line"
[ "$(grep -c '^rank [0-9]* {$' "$dir/ar.goal")" -eq 4 ] || fail "expected 4 rank blocks"
[ "$(grep -c ': send 1024b to ' "$dir/ar.goal")" -eq 24 ] || fail "expected 24 sends of 1 KiB"
[ "$(grep -c ': calc 204800$' "$dir/ar.goal")" -eq 12 ] || fail "expected 12 calcs of 1024 B g"

out=$("$goal" --help) || fail "--help should exit 0"
grep -q "usage: weft-sim-goal" <<<"$out" || fail "--help: $out"
out=$("$goal" 2>&1)
[ $? -eq 2 ] || fail "no output file should exit 2"
out=$("$goal" "$dir/x.goal" -C all_reduce -A all 2>&1)
[ $? -eq 2 ] || fail "-A all should exit 2"
grep -q "one algorithm" <<<"$out" || fail "-A all: $out"
out=$("$goal" "$dir/x.goal" -C send -A ring -p 4 -b 4K 2>&1)
[ $? -eq 1 ] || fail "send should exit 1"
grep -q "send is not exported" <<<"$out" || fail "send: $out"
out=$("$goal" /nonexistent/dir/x.goal -C all_reduce -A ring -p 4 -b 4K 2>&1)
[ $? -eq 1 ] || fail "an unwritable file should exit 1"
grep -q "cannot write /nonexistent/dir/x.goal" <<<"$out" || fail "unwritable: $out"
echo PASS
