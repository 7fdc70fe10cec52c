#!/bin/bash
# weft_sim_algo_file_test.sh -- weft-sim --algo-file end to end on tests/msccl/data: rows named
# "file", the program's collective and rank count, sizes the program cannot cut as comments, and
# a malformed file's error (exit 2) naming its line.
set -u
sim="$1"
data="$2"
fail() { echo "FAIL: $*"; exit 1; }

out=$("$sim" --algo-file "$data/ring_allreduce_4x2.xml" -b 64K -e 16M -f 4) || fail "run: $out"
rows=$(grep -c ' float32 *file ' <<<"$out")
[ "$rows" -eq 5 ] || fail "expected 5 rows (64K .. 16M), got $rows: $out"
grep -q '# weft-sim all_reduce: 4 ranks' <<<"$out" || fail "not the program's shape: $out"
grep -q 'program "ring_allreduce" from .*, 2 channels' <<<"$out" || fail "no program line: $out"

out=$("$sim" --algo-file "$data/direct_allgather_4x2.xml" -b 64K -e 64K) || fail "allgather: $out"
grep -q '# weft-sim all_gather: 4 ranks' <<<"$out" || fail "all_gather from the file: $out"
grep -q ' file ' <<<"$out" || fail "no all_gather row: $out"

out=$("$sim" --algo-file "$data/cross_channel_allgather_2.xml" -b 16K -e 16K --trace) ||
  fail "cross-channel program: $out"
grep -q ' file ' <<<"$out" || fail "cross-channel program printed no row: $out"

out=$("$sim" --algo-file "$data/allpairs_allreduce_4x2.xml" -b 12 -e 12) || fail "12 B: $out"
grep -q 'count 3 is not a multiple of 8' <<<"$out" || fail "12 B should be a comment naming 8: $out"

bad=$(mktemp)
trap 'rm -f "$bad"' EXIT
sed 's/type="rrs"/type="rrx"/' "$data/ring_allreduce_4x2.xml" >"$bad"
out=$("$sim" --algo-file "$bad" 2>&1)
[ $? -eq 2 ] || fail "a malformed file should exit 2: $out"
grep -q ':[0-9]*: <step>: unknown type "rrx"' <<<"$out" || fail "error should name the line: $out"
echo PASS
