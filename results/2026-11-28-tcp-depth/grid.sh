#!/bin/bash
# grid.sh -- the exploration before the change: weft's all-reduce under several environments,
# each once per round in a rotating order, beside Open MPI ("mpi"); prints each variant's busbw
# per size over the rounds, sorted. Variants are comma-separated VAR=value lists, e.g.
#   H=<dir of the experiment.patch build> N=2 B=256K E=64M ITERS=20 ROUNDS=5 OUT=/tmp/g \
#     grid.sh WEFT_SLICES_IN_FLIGHT=4 WEFT_SLICES_IN_FLIGHT=16,WEFT_X_CAP=262144 mpi
# (WEFT_X_CAP, WEFT_X_ONCE and WEFT_X_CAPDIR exist only in experiment.patch's build; TR=shm with
# MPIARGS= compares over shared memory.)
H=${H:-/tmp/ab/head}; out=${OUT:-/tmp/tcp_var}; mkdir -p $out; n=${N:-2}
vars=("$@"); nv=${#vars[@]}
for rep in $(seq 1 ${ROUNDS:-10}); do
  for k in $(seq 0 $((nv-1))); do
    v=${vars[$(( (k + rep) % nv ))]}
    if [ $v = mpi ]; then
      timeout 120 mpirun --oversubscribe --allow-run-as-root ${MPIARGS---mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo} -np $n /tmp/pb/mpi_bench -b ${B:-1M} -e ${E:-2M} -n ${ITERS:-30} -w 3 > $out/mpi.r$rep.log 2>&1
    else
      env ${v//,/ } WEFT_TRANSPORT=${TR:-tcp} timeout 120 $H/weft-run -n $n --bind $([ $n -le $(nproc) ] && echo core || echo none) --no-prefix -- $H/weft_bench -b ${B:-1M} -e ${E:-2M} -n ${ITERS:-30} -w 3 > $out/$v.r$rep.log 2>&1
    fi
  done
done
cd $out
for v in "${vars[@]}"; do for s in $(grep -hv '^#' $v.r1.log | awk '{print $1}'); do
  echo "$v $s: $(for f in $v.r*.log; do grep -v '^#' $f | awk -v s=$s '$1==s{print $5}'; done | sort -g | tr '\n' ' ')"; done; done
