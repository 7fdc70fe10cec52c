#!/bin/sh
# One rank of run.sh, inside its VM (scripts/rdma-vm.sh sets RANK, MASTER_ADDR, ...).
# For each repetition: perftest's ib_write_bw one way and both ways on the rxe link, then weft's
# all-reduce and sendrecv over verbs and over TCP, on the same two VMs.
B=${1:?usage: rank.sh BINDIR [SIZE] [REPS] [all|weft]}; SIZE=${2:-4194304}; REPS=${3:-3}; WHAT=${4:-all}
gid=$(for i in 0 1 2 3 4 5 6 7; do t=$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null); g=$(cat /sys/class/infiniband/rxe0/ports/1/gids/$i 2>/dev/null); case "$t:$g" in "RoCE v2:0000:0000:0000:0000:0000:ffff:"*) echo $i; break;; esac; done)
perf() { # $1 port, rest: flags
  p=$1; shift
  if [ "$RANK" = 0 ]; then ib_write_bw -d rxe0 -x $gid -p $p -s $SIZE -n 10 -F "$@"
  else sleep 3; ib_write_bw -d rxe0 -x $gid -p $p -s $SIZE -n 10 -F "$@" $MASTER_ADDR; fi
}
bench() { # $1 port, $2 transport, $3 collective
  MASTER_PORT=$1 WEFT_TRANSPORT=$2 $B/weft-bench -C $3 -b $SIZE -e $SIZE -n 5 -w 1
}
fail=0
k=0
for rep in $(seq $REPS); do
  if [ "$WHAT" != weft ]; then
    k=$((k + 1)); echo "== rep $rep ib_write_bw one-way"; perf $((18500 + k)) 2>&1 | grep -E "^ *[0-9]+ +[0-9]+"
    k=$((k + 1)); echo "== rep $rep ib_write_bw both-ways"; perf $((18500 + k)) -b 2>&1 | grep -E "^ *[0-9]+ +[0-9]+"
  fi
  for t in ib tcp; do for c in all_reduce sendrecv; do
    k=$((k + 1)); echo "== rep $rep weft $t $c"
    bench $((29600 + k)) $t $c > /tmp/bench.out 2>&1 || { echo "weft-bench failed"; fail=1; }
    grep -vE "^# +Rank|^#$" /tmp/bench.out
  done; done
done
exit $fail
