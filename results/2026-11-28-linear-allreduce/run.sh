#!/bin/bash
# A/B: recursive doubling vs linear all-reduce, weft over shm, and Open MPI, alternating.
O=${OUT:-/tmp/linab/out}; mkdir -p $O; B=${BIN:-/tmp/ab/lin}
for rep in $(seq 1 6); do
  for n in 4 3; do
    for a in recursive_doubling linear; do
      WEFT_ALGO=all_reduce=$a WEFT_TRANSPORT=shm timeout 120 $B/weft-run -n $n --no-prefix -- $B/weft_bench -b 8 -e 64K -n 2000 -w 3 > $O/$a-$n.r$rep.log 2>&1
    done
    timeout 120 mpirun --oversubscribe --allow-run-as-root -np $n /tmp/pb/mpi_bench -b 8 -e 64K -n 2000 -w 3 > $O/mpi-$n.r$rep.log 2>&1
  done
done
