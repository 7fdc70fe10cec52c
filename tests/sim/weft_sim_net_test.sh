#!/bin/bash
# weft_sim_net_test.sh -- the network mode's commands in tools/sim/README.md ("Network model"),
# end to end: each difference the table shows, in the direction and about the size it shows.
set -u
sim="$1"
T="$2"  # tools/sim/topologies/rail8.topo
fail() { echo "FAIL: $*"; exit 1; }
G="--gamma 0 -b 256M -e 256M"
# The time column (us) of a run's one row.
t() { out=$("$sim" "$@") || fail "weft-sim $*: $out"; tail -1 <<<"$out" | awk '{print $5}'; }
# ratio a b lo hi: fails unless lo <= a/b <= hi.
ratio() {
  awk -v a="$1" -v b="$2" -v lo="$3" -v hi="$4" 'BEGIN { r = a / b; exit !(r >= lo && r <= hi) }' ||
    fail "$5: $1 / $2 outside $3 .. $4"
}

# The README's first two commands.
out=$("$sim" -C all_reduce -A ring -p 64 --topology "$T") || fail "rail8 ring: $out"
grep -q '^# network: 8 nodes of 8 devices' <<<"$out" || fail "no network line: $out"
grep -q ' ring .* N/A ' <<<"$out" || fail "network mode should print no closed form: $out"
out=$("$sim" -C all_to_all -p 16 --net gpus_per_node=1 --net nics_per_leaf=2 \
  --net oversubscription=4 -b 1M -e 256M -f 4) || fail "fat-tree all-to-all: $out"
[ "$(grep -c ' float32 ' <<<"$out")" -eq 10 ] || fail "expected 10 rows: $out"

own=$(t -C all_to_all -A pairwise -p 16 --topology "$T" --net layout=flat --net nics_per_node=8 $G)
shared=$(t -C all_to_all -A pairwise -p 16 --topology "$T" --net layout=flat --net nics_per_node=1 $G)
ratio "$shared" "$own" 4 8 "one NIC per node vs one per device"

tree="--net gpus_per_node=1 --net nic_bw=50e9 --net nic_latency=5e-6"
full=$(t -C all_to_all -A pairwise -p 16 $tree --net nics_per_leaf=2 --net oversubscription=1 $G)
over=$(t -C all_to_all -A pairwise -p 16 $tree --net nics_per_leaf=2 --net oversubscription=4 $G)
ratio "$over" "$full" 3.3 3.8 "cross-leaf all-to-all at 4:1 vs 1:1"
full=$(t -C all_to_all -A pairwise -p 16 $tree --net nics_per_leaf=16 --net oversubscription=1 $G)
over=$(t -C all_to_all -A pairwise -p 16 $tree --net nics_per_leaf=16 --net oversubscription=4 $G)
ratio "$over" "$full" 1 1 "intra-leaf all-to-all at 4:1 vs 1:1"

order="$TEST_TMPDIR/rev.txt"
echo "0 1 2 3 4 5 6 7 15 14 13 12 11 10 9 8" >"$order"
rail="--topology $T --net nics_per_leaf=2 --net oversubscription=4"
unaware=$(t -C all_reduce -A ring -p 16 $rail $G)
aligned=$(t -C all_reduce -A ring -p 16 $rail --rank-order "$order" $G)
ratio "$unaware" "$aligned" 3.5 4.5 "ring across rails vs along them"

tree="--topology $T --net layout=flat --net nics_per_leaf=8"
for o in 1 4; do
  ring=$(t -C all_reduce -A ring -p 64 $tree --net oversubscription=$o $G)
  hier=$(t -C all_reduce -A hierarchical -p 64 $tree --net oversubscription=$o $G)
  ratio "$hier" "$ring" 0.2 0.6 "hierarchical vs ring at $o:1"
done

out=$("$sim" --topology "$T" --net layout=torus 2>&1)
[ $? -eq 2 ] || fail "a bad --net value should exit 2"
grep -q "key 'layout': bad value 'torus'" <<<"$out" || fail "bad --net value: $out"
echo PASS
