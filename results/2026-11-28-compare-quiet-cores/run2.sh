#!/bin/bash
# Second run on the same host: small-call latency (weft before/after, Open MPI at 2 ranks) and the DDP step.
set -u
G=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/out}
mkdir -p "$O/lat" "$O/ddp"
export LD_LIBRARY_PATH=$G/lib:$G/ompi/lib
export OPAL_PREFIX=$G/ompi PRTE_PREFIX=$G/ompi PMIX_PREFIX=$G/ompi PATH=$G/ompi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
chmod +x "$G"/ompi/bin/* "$G"/before/* "$G"/after/* "$G"/peers/* 2>/dev/null
PIN=(taskset -c 0,1)
P=$G/peers
t0=$(date +%s)
LAT=(-b 8 -e 4K -f 8 -n 200 -w 20)
# DDP first (ddp_ab.py: 5 alternations of 20 steps, weft then gloo).
for n in 2 4; do
  for d in before after; do
    PYTHONPATH=$G/python:$G/torchbench WEFT_LIBRARY=$G/$d/libweft.so OMP_NUM_THREADS=1 timeout 60 \
      "${PIN[@]}" python3 -m torch.distributed.run --nproc-per-node $n --master-port $((29600 + n)) \
      $G/torchbench/ddp_ab.py > "$O/ddp/$d-${n}ranks.log" 2>&1
    echo "ddp $d $n: $(grep -h 'DDP step' "$O/ddp/$d-${n}ranks.log") at $(( $(date +%s) - t0 )) s" >> "$O/progress.txt"
  done
done
for rep in 1 2; do
  for n in 2 4; do
    for d in before after; do
      for t in tcp shm; do
        PEER_VARIANT=weft WEFT_TRANSPORT=$t timeout 30 "${PIN[@]}" "$G/$d/weft-run" -n "$n" --no-prefix -- "$G/$d/weft_bench" "${LAT[@]}" > "$O/lat/$d-weft-${t}_${n}ranks.r$rep.log" 2>&1
      done
    done
    if [ $n = 2 ]; then
      PEER_VARIANT=default timeout 30 "${PIN[@]}" mpirun --oversubscribe --bind-to none -np 2 $P/mpi_bench "${LAT[@]}" > "$O/lat/mpi-default_2ranks.r$rep.log" 2>&1
      PEER_VARIANT=tcp timeout 30 "${PIN[@]}" mpirun --oversubscribe --bind-to none --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo -np 2 $P/mpi_bench "${LAT[@]}" > "$O/lat/mpi-tcp_2ranks.r$rep.log" 2>&1
    fi
    echo "lat rep $rep n $n done at $(( $(date +%s) - t0 )) s" >> "$O/progress.txt"
  done
done
cd "$O" && tar czf lat_ddp.tgz lat ddp && rm -rf lat ddp
