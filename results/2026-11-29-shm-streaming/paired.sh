#!/usr/bin/env bash
# paired.sh OUT ROUNDS -- weft before and after, and Open MPI (its defaults), over shared memory at 2
# and 4 ranks, 4 KiB-64 MiB, one sweep each per round in turn. Each log starts and ends with the
# host's phase: `pipe` (this folder's pipe.c, 64 KiB slices through a 2 MiB ring between the two
# cores) moves ~35 GB/s in the fast phase and ~2.5 in the slow one; table.py keeps the runs whose
# two readings agree. Needs OLD and NEW (folders with weft-run and weft_bench), MPI_BENCH (built
# from tools/peers/mpi_bench.c) and PIPE (pipe.c built: gcc -O2 -o pipe pipe.c).
set -u
out=$1 rounds=$2
mkdir -p "$out"
phase() { echo "# $(date +%T) pipe $("$PIPE" 64 32 1024 30 0 0)"; }
for ((r = 1; r <= rounds; r++)); do
  for n in 2 4; do
    bind=none
    [ "$n" -le "$(nproc)" ] && bind=core
    for v in old new mpi; do
      log=$out/$v-$n.r$r.log
      {
        phase
        case $v in
          mpi) mpirun --oversubscribe --allow-run-as-root -np "$n" "$MPI_BENCH" -b 4K -e 64M -n 20 -w 3 ;;
          *)
            P=$OLD
            [ $v = new ] && P=$NEW
            WEFT_TRANSPORT=shm "$P/weft-run" -n "$n" --bind $bind --no-prefix -- \
              "$P/weft_bench" -b 4K -e 64M -n 20 -w 3 ;;
        esac
        phase
      } >"$log" 2>&1
    done
  done
done
