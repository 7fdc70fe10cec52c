#!/bin/bash
# first-touch A/B: weft after (c2733b5) vs pop (segments mapped with MAP_POPULATE, TCP pool touched
# at allocation), shm, compare.sh's sweep arguments (-n 20 -w 3), Open MPI default alongside.
cd /tmp/ab; O=${1:-/tmp/ft/out}; mkdir -p $O
for rep in 1 2 3; do for n in 2 4; do
  bind=none; [ $n -le 2 ] && bind=core
  for v in after pop; do
    WEFT_TRANSPORT=shm ./weft-run -n $n --bind $bind --no-prefix -- ./$v/weft_bench -b 4K -e 16M -f 2 -n 20 -w 3 > $O/$v.${n}ranks.r$rep.log 2>&1
  done
  mpirun --allow-run-as-root --oversubscribe -np $n /tmp/pb/mpi_bench -b 4K -e 16M -f 2 -n 20 -w 3 > $O/ompi.${n}ranks.r$rep.log 2>&1
done; done
