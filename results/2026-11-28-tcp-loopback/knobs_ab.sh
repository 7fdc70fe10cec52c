#!/usr/bin/env bash
# alternating A/B of socket-buffer and spin settings, before binary, 2 pinned cores
cd "$(dirname "$0")"; O=${OUT:-/tmp/out}; mkdir -p $O
T="taskset -c 0,1"
run() { local b=$1 n=$2 l=$3 r=$4; shift 4
  env "$@" WEFT_TRANSPORT=tcp /usr/bin/time -f "CPU %e %U %S" $T timeout 100 $b/weft-run -n $n --no-prefix -- $b/weft_bench -b 4M -e 256M -f 4 -n 8 -w 1 2>&1 | grep -v '^#' | sed "s/^/$l $n r$r /"; }
for rep in 1 2 3; do for n in 2 4; do
  run before $n sb4M $rep
  run before $n sb256K $rep WEFT_SOCKET_BUFFER=262144
  run before $n sb1M $rep WEFT_SOCKET_BUFFER=1048576
  run before $n sb0 $rep WEFT_SOCKET_BUFFER=0
  run before $n spin0 $rep WEFT_SPIN_US=0
done; done > $O/ab.txt 2>&1
grep CPU $O/ab.txt
