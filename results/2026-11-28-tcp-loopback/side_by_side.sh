#!/usr/bin/env bash
# side_by_side.sh -- TCP all-reduce busbw of two weft builds on 2 pinned cores, alternating, 3 repeats; Gloo and the loopback limits once
# Usage: side_by_side.sh DIR OUT: DIR holds before/ and after/ (weft-run, weft_bench from
# //tools:weft-run and //tools/peers:weft_bench), gloo_bench, tcp_loopback, reduce_bw (compare.sh
# builds the same) and lib/ with libgloo and its libraries where the machine lacks them.
cd "$1"; O=$2; mkdir -p $O
export LD_LIBRARY_PATH=$PWD/lib
T="taskset -c 0,1"
{ echo "uptime $(uptime)"; nproc; uname -r; sysctl net.core.wmem_max net.core.rmem_max net.ipv4.tcp_wmem 2>/dev/null
for i in 1 2 3; do $T ./tcp_loopback; $T ./tcp_loopback cold; $T ./reduce_bw; done; } > $O/limits.txt 2>&1
run() { local b=$1 n=$2 r=$3
  WEFT_TRANSPORT=tcp /usr/bin/time -f "CPU %e %U %S" $T timeout 100 $b/weft-run -n $n --no-prefix -- $b/weft_bench -b 4K -e 256M -f 2 -n 10 -w 2 2>&1 | grep -v '^#' | sed "s/^/$b $n r$r /"; }
for rep in 1 2 3; do for n in 2 4; do
  if [ $((rep % 2)) = 1 ]; then run before $n $rep; run after $n $rep; else run after $n $rep; run before $n $rep; fi
done; done > $O/weft.txt 2>&1
for n in 2 4; do mx=256M; [ $n = 4 ] && mx=64M; d=$(mktemp -d); for ((r=0;r<n;r++)); do RANK=$r WORLD_SIZE=$n GLOO_STORE_DIR=$d $T timeout 150 ./gloo_bench -b 4K -e $mx -n 5 -w 1 > $( [ $r = 0 ] && echo $O/gloo_$n.log || echo /tmp/gloo_${n}_$r.log ) 2>&1 & done; wait; done
echo "uptime $(uptime)" >> $O/limits.txt
cat $O/limits.txt; grep CPU $O/weft.txt
