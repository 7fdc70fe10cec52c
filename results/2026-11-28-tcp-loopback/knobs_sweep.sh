#!/usr/bin/env bash
# knob sweep of the before binary on 2 pinned cores
cd "$(dirname "$0")"; O=${OUT:-/tmp/out}; mkdir -p $O
export LD_LIBRARY_PATH=$PWD/lib
nproc; uname -r; cat /etc/debian_version 2>/dev/null
T="taskset -c 0,1"
for i in 1 2 3; do $T ./tcp_loopback; $T ./tcp_loopback cold; done | tee $O/loop.txt
run() { # bin n label env...
  local b=$1 n=$2 l=$3; shift 3
  env "$@" WEFT_TRANSPORT=tcp /usr/bin/time -f "CPU %e %U %S" $T timeout 120 $b/weft-run -n $n --no-prefix -- $b/weft_bench -b 1M -e 256M -f 4 -n 6 -w 1 2>&1 | grep -v '^#' | sed "s/^/$l $n /"
}
for rep in 1; do
for n in 2 4; do
  run before $n base
  run before $n sb0 WEFT_SOCKET_BUFFER=0
  run before $n sb1M WEFT_SOCKET_BUFFER=1048576
  run before $n sb16M WEFT_SOCKET_BUFFER=16777216
  run before $n ns2 WEFT_NSOCKS=2
  run before $n sl256K WEFT_SLICE_BYTES=262144
  run before $n sl1M WEFT_SLICE_BYTES=1048576
  run before $n spin0 WEFT_SPIN_US=0
done
done | tee $O/explore.txt
# gloo for reference
for n in 2 4; do d=$(mktemp -d); for ((r=0;r<n;r++)); do RANK=$r WORLD_SIZE=$n GLOO_STORE_DIR=$d $T timeout 120 ./gloo_bench -b 1M -e 64M -n 4 -w 1 > $O/gloo_${n}_$r.log 2>&1 & done; wait; done
head -40 $O/gloo_2_0.log
