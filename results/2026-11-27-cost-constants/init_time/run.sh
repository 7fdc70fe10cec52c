#!/bin/bash
# Old (measures the cost model at init) and new (committed constants) side by side, alternating.
B=/tmp/determ_bin
for n in 2 4; do
for r in 1 2 3 4 5; do
  for v in old new; do
    LD_LIBRARY_PATH=/tmp/determ_init/$v nice -n 10 $B/weft-run -n $n --no-prefix --timeout 120 ./initt 5 | sed "s/^/$v n=$n round=$r /"
  done
done
done
