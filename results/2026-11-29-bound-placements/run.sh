#!/bin/bash
O=${OUT:-/tmp/bound-placements}; mkdir -p $O
for rep in 1 2 3; do
 for pl in 0011 0101 0110 none; do
  if [ $pl = none ]; then W=""; else W="$(dirname $0)/pin.sh $pl"; fi
  for a in plan bound; do
   B=/tmp/ab/$a
   WEFT_TRANSPORT=shm timeout 120 $B/weft-run -n 4 --no-prefix -- $W $B/weft_bench -b 8 -e 1K -n 4000 -w 3 > $O/$a-$pl.r$rep.log 2>&1
  done
  timeout 120 mpirun --oversubscribe --allow-run-as-root -np 4 $W /tmp/pb/mpi_bench -b 8 -e 1K -n 4000 -w 3 > $O/mpi-$pl.r$rep.log 2>&1
 done
done
