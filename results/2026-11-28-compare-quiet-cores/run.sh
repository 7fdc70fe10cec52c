#!/bin/bash
# One run on an otherwise idle 16-core x86 host: weft before/after against Gloo and Open MPI (5.0 wheel),
# the runs of scripts/compare.sh, all pinned to two cores (taskset -c 0,1) like the 2-core host.
set -u
G=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/out}
mkdir -p "$O/before/raw" "$O/after/raw" "$O/peers/raw" "$O/lat"
export LD_LIBRARY_PATH=$G/lib:$G/ompi/lib
export OPAL_PREFIX=$G/ompi PRTE_PREFIX=$G/ompi PMIX_PREFIX=$G/ompi PATH=$G/ompi/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
chmod +x "$G"/ompi/bin/* "$G"/before/* "$G"/after/* "$G"/peers/* 2>/dev/null
PIN=(taskset -c 0,1)
P=$G/peers
{
  echo "date $(date -Is) host $(hostname) nproc $(nproc) pinned 0,1 load $(cut -d' ' -f1-3 /proc/loadavg)"
  lscpu | grep -E "Model name|^CPU\(s\)|MHz" | head -3
  echo "memcpy_GBps $(for i in 1 2 3; do "${PIN[@]}" $P/memcpy_bw | awk '{print $2}'; done | sort -g | sed -n 2p)"
  echo "reduce_GBps $(for i in 1 2 3; do "${PIN[@]}" $P/reduce_bw | awk '{print $2}'; done | sort -g | sed -n 2p)"
  echo "tcp_loopback $(for i in 1 2 3; do "${PIN[@]}" $P/tcp_loopback | awk '{print $2, $4}'; done | sort -g | sed -n 2p)"
  echo "tcp_loopback_cold $(for i in 1 2 3; do "${PIN[@]}" $P/tcp_loopback cold | awk '{print $2, $4}'; done | sort -g | sed -n 2p)"
  for n in 2 4; do echo "tcp_floor_us $n $(for i in 1 2 3; do "${PIN[@]}" $P/tcp_latency_floor $n 4096 2000 | awk '{print $2}'; done | sort -g | sed -n 2p)"; done
} > "$O/limits.txt" 2>&1
weft() { # dir ranks variant transport args...
  local d=$1 n=$2 v=$3 t=$4; shift 4
  PEER_VARIANT=$v WEFT_TRANSPORT=$t timeout 120 "${PIN[@]}" "$G/$d/weft-run" -n "$n" --no-prefix -- "$G/$d/weft_bench" "$@"
}
gloo() { # ranks args...
  local n=$1; shift; local s; s=$(mktemp -d); local pids=()
  for ((r = 0; r < n; r++)); do RANK=$r WORLD_SIZE=$n GLOO_STORE_DIR=$s timeout 120 "${PIN[@]}" $P/gloo_bench "$@" > "$s/g$r.log" 2>&1 & pids+=($!); done
  for p in "${pids[@]}"; do wait $p; done; cat "$s"/g*.log; rm -rf "$s"
}
ompi() { # ranks variant(default|tcp) args...
  local n=$1 v=$2; shift 2
  local extra=()
  [ "$v" = tcp ] && extra=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
  PEER_VARIANT=$v timeout 120 "${PIN[@]}" mpirun --oversubscribe --bind-to none "${extra[@]}" -np "$n" $P/mpi_bench "$@"
}
BW=(-b 16K -e 256M -f 4 -n 10 -w 2)
LAT=(-b 8 -e 4K -f 8 -n 500 -w 50)
REPS=${REPS:-2}
LREPS=${LREPS:-3}
if [ -n "${QUICK:-}" ]; then BW=(-b 4K -e 1M -f 16 -n 2 -w 1); LAT=(-b 8 -e 64 -f 8 -n 10 -w 1); fi
t0=$(date +%s)
for rep in $(seq 1 $REPS); do
  for n in 2 4; do
    for d in before after; do
      for t in tcp shm; do weft $d $n weft $t "${BW[@]}" > "$O/$d/raw/weft-${t}_${n}ranks.r$rep.log" 2>&1; done
    done
    gloo $n "${BW[@]}" > "$O/peers/raw/gloo_${n}ranks.r$rep.log" 2>&1
    ompi $n default "${BW[@]}" > "$O/peers/raw/mpi-default_${n}ranks.r$rep.log" 2>&1
    ompi $n tcp "${BW[@]}" > "$O/peers/raw/mpi-tcp_${n}ranks.r$rep.log" 2>&1
    echo "bw rep $rep n $n done at $(( $(date +%s) - t0 )) s" >> "$O/progress.txt"
  done
done
(cd "$O" && tar czf bw.tgz before after peers && rm -rf before after peers)
for rep in $(seq 1 $LREPS); do
  for n in 2 4; do
    for d in before after; do
      for t in tcp shm; do weft $d $n weft $t "${LAT[@]}" > "$O/lat/$d-weft-${t}_${n}ranks.r$rep.log" 2>&1; done
    done
    ompi $n default "${LAT[@]}" > "$O/lat/mpi-default_${n}ranks.r$rep.log" 2>&1
    ompi $n tcp "${LAT[@]}" > "$O/lat/mpi-tcp_${n}ranks.r$rep.log" 2>&1
    echo "lat rep $rep n $n done at $(( $(date +%s) - t0 )) s" >> "$O/progress.txt"
  done
done
(cd "$O" && tar czf lat.tgz lat && rm -rf lat)
# DDP step of results/2026-11-25-torch2's MLP: weft before/after against gloo (ddp_ab.py).
if [ -z "${NO_DDP:-}" ]; then
  for n in 2 4; do
    for d in before after; do
      PYTHONPATH=$G/python:$G/torchbench WEFT_LIBRARY=$G/$d/libweft.so OMP_NUM_THREADS=1 timeout 90 \
        "${PIN[@]}" ${PY:-python3} -m torch.distributed.run --nproc-per-node $n --master-port $((29600 + n)) \
        $G/torchbench/ddp_ab.py > "$O/ddp-$d-${n}ranks.log" 2>&1
      echo "ddp $d $n: $(grep -h 'DDP step' "$O/ddp-$d-${n}ranks.log") at $(( $(date +%s) - t0 )) s" >> "$O/progress.txt"
    done
  done
fi
cd "$O" && tar czf ddp.tgz ddp-*.log && rm -f ddp-*.log
