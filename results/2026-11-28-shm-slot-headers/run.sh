#!/bin/bash
# run.sh -- weft before (3e23209) and after (the slot headers), Open MPI 4.1 (Debian) alongside,
# float32 sum all-reduce in place, us per call. In BIN: weft-run, before/weft_bench,
# after/weft_bench (bazel build -c opt //tools:weft-run //tools/peers:weft_bench at each
# commit), mpi_bench (mpicc -O2 tools/peers/mpi_bench.c).
set -e
BIN=${1:?BIN}; OUT=${2:?OUT}
mkdir -p "$OUT/2ranks" "$OUT/4ranks"
cd "$BIN"
for rep in 1 2 3 4 5 6; do   # 2 ranks, a core each (Open MPI binds them so by default)
  for v in before after; do
    WEFT_TRANSPORT=shm ./weft-run -n 2 --bind core --no-prefix -- ./$v/weft_bench -b 8 -e 64K -f 2 -n 200 -w 20 > "$OUT/2ranks/$v.bound.r$rep.log" 2>&1
  done
  mpirun --allow-run-as-root -np 2 ./mpi_bench -b 8 -e 64K -f 2 -n 200 -w 20 > "$OUT/2ranks/ompi.r$rep.log" 2>&1
done
for rep in 1 2 3 4; do       # 4 ranks on the 2 cores: nothing bound
  for v in before after; do
    WEFT_TRANSPORT=shm ./weft-run -n 4 --no-prefix -- ./$v/weft_bench -b 8 -e 64K -f 8 -n 100 -w 10 > "$OUT/4ranks/$v.r$rep.log" 2>&1
  done
  mpirun --allow-run-as-root --oversubscribe -np 4 ./mpi_bench -b 8 -e 64K -f 8 -n 100 -w 10 > "$OUT/4ranks/ompi.r$rep.log" 2>&1
done
