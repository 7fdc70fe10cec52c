#!/bin/bash
# period.sh REPS PLACEMENT series...: wall time per iteration (barrier + 8 B all-reduce) from the difference of two run lengths
R=$1; P=$2; shift 2; S=("$@")
run() { # series n
  local W=""; [ $P != none ] && W="/tmp/place/pin.sh $P"
  local t0=$(date +%s.%N)
  if [ $1 = mpi ]; then timeout 120 mpirun --oversubscribe --allow-run-as-root -np 4 $W /tmp/pb/mpi_bench -b 8 -e 8 -n $2 -w 3 > /tmp/place/period.out 2>&1
  else WEFT_TRANSPORT=shm timeout 120 /tmp/ab/$1/weft-run -n 4 --no-prefix -- $W /tmp/ab/$1/weft_bench -b 8 -e 8 -n $2 -w 3 > /tmp/place/period.out 2>&1; fi
  local t1=$(date +%s.%N); lat=$(grep -v '^#' /tmp/place/period.out | awk '{print $3}')
  echo "$t1 - $t0" | bc
}
for rep in $(seq 1 $R); do for k in $(seq 0 $((${#S[@]}-1))); do s=${S[$(( (k+rep) % ${#S[@]} ))]}
  a=$(run $s 2000); la=$lat; b=$(run $s 12000); lb=$lat
  echo "$s period_us $(echo "($b - $a) * 1000000 / (16 * 10000)" | bc -l | cut -c1-5) allreduce_us $la $lb"
done; done
