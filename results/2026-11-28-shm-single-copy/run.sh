#!/usr/bin/env bash
# run.sh -- weft over shm before (main's binaries) and after the single-copy path, alternating in
# one run, next to Open MPI's default; raw nccl-tests style tables into raw/.
# Usage: run.sh BEFORE_DIR AFTER_DIR MPI_BENCH OUT   (the dirs hold weft-run and weft-bench)
set -u
before=$1 after=$2 mpi=$3 out=$4
mkdir -p "$out/raw"
uptime >"$out/load.txt"
for rep in 1 2 3; do
  for n in 2 4; do
    for coll in all_reduce broadcast all_gather sendrecv; do
      for v in before after; do
        d=$before; [ $v = after ] && d=$after
        WEFT_TRANSPORT=shm timeout 300 "$d/weft-run" -n $n --no-prefix -- "$d/weft-bench" -C $coll \
          -b 64K -e 256M -f 4 -n 10 -w 2 -c 0 >"$out/raw/${coll}_${n}ranks_${v}.r$rep.log" 2>&1
      done
    done
    timeout 300 mpirun --oversubscribe --allow-run-as-root -np $n "$mpi" -b 64K -e 256M -n 10 -w 2 \
      >"$out/raw/mpi_all_reduce_${n}ranks.r$rep.log" 2>&1
    uptime >>"$out/load.txt"
  done
done
