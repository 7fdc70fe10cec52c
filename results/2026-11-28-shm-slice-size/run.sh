#!/bin/bash
# 2 ranks over shm, bound: WEFT_SLICE_BYTES x WEFT_SHM_SLOTS variants against Open MPI's default,
# alternating, $1 passes; busbw of -b 1M -e 32M -f 2 -n 20 -w 3.
D=${WEFT_BIN:?directory with weft-run, weft_bench}; out=$(dirname "$0")/raw; mkdir -p $out
for pass in $(seq 1 ${1:-3}); do
  for v in 65536:32 131072:16 262144:8 131072:32 262144:16; do
    sb=${v%:*}; ns=${v#*:}
    WEFT_SLICE_BYTES=$sb WEFT_SHM_SLOTS=$ns WEFT_TRANSPORT=shm timeout 120 $D/weft-run -n 2 --bind core --no-prefix -- $D/weft_bench -b 1M -e 32M -f 2 -n 20 -w 3 > $out/w-$sb-$ns.r$pass.log 2>&1
  done
  timeout 120 mpirun --oversubscribe --allow-run-as-root -np 2 ${MPI_BENCH:?mpi_bench built from tools/peers/mpi_bench.c} -b 1M -e 32M -f 2 -n 20 -w 3 > $out/mpi.r$pass.log 2>&1
done
