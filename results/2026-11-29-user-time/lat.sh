#!/bin/bash
# lat.sh OUT REPS NRANKS PLACEMENT series...: 8 B - 1 KiB all-reduce over shm, series in turn, order rotating per repeat
O=$1; R=$2; N=$3; P=$4; shift 4; mkdir -p $O; S=("$@")
for rep in $(seq 1 $R); do
  for k in $(seq 0 $((${#S[@]}-1))); do s=${S[$(( (k+rep) % ${#S[@]} ))]}
    W=""; [ $P != none ] && W="/tmp/place/pin.sh $P"
    if [ $s = mpi ]; then
      timeout 120 mpirun --oversubscribe --allow-run-as-root -np $N $W /tmp/pb/mpi_bench -b 8 -e 1K -n 4000 -w 3 > $O/$s-$P.r$rep.log 2>&1
    else
      WEFT_TRANSPORT=shm timeout 120 /tmp/ab/$s/weft-run -n $N --no-prefix -- $W /tmp/ab/$s/weft_bench -b 8 -e 1K -n 4000 -w 3 > $O/$s-$P.r$rep.log 2>&1
    fi
  done
done
