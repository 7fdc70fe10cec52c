#!/bin/bash
# ut.sh OUT REPS PLACEMENT series...: user and system CPU seconds (4 ranks summed) and the 8-byte time, alternating
O=$1; R=$2; P=$3; shift 3; mkdir -p $O
for rep in $(seq 1 $R); do for s in "$@"; do
  if [ $s = mpi ]; then
    t=$(mpirun --oversubscribe --allow-run-as-root -np 4 /tmp/place/tw.sh $s.$rep $P /tmp/pb/mpi_bench -b 8 -e 8 -n 20000 -w 3 | awk '$1==8{print $3}')
  else
    t=$(WEFT_TRANSPORT=shm /tmp/ab/$s/weft-run -n 4 --no-prefix -- /tmp/place/tw.sh $s.$rep $P /tmp/ab/$s/weft_bench -b 8 -e 8 -n 20000 -w 3 | awk '$1==8{print $3}')
  fi
  echo "$s $rep $t $(cat /tmp/place/perf/$s.$rep.time.* | awk '{u+=$1;s+=$2} END{print u,s}')" | tee -a $O/ut.txt
done; done
