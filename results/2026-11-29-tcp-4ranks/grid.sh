#!/usr/bin/env bash
# grid.sh BIN OUT ROUNDS -- a 256 KiB-16 MiB float32 sum all-reduce sweep at N ranks over transport T:
# weft's automatic choice, each all-reduce algorithm forced (WEFT_ALGO), and Open MPI (MPIARGS), one
# sweep each per round in an order that starts one further along every round. BIN: weft's bazel-bin;
# MPI_BENCH: tools/peers/mpi_bench.c built with mpicc. As run: T=tcp N=4 BIND=none
# MPIARGS="--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo".
B=$1 OUT=$2 ROUNDS=${3:-3}
mkdir -p "$OUT"
vars=(auto ring rabenseifner recursive_doubling double_tree mpi)
sweep=(-b 256K -e 16M -n 20 -w 3)
for r in $(seq 1 "$ROUNDS"); do
  for k in $(seq 0 5); do
    v=${vars[$(((r + k) % 6))]}
    log=$OUT/$v.r$r.log
    echo "# $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >"$log"
    if [ "$v" = mpi ]; then
      # shellcheck disable=SC2086
      timeout 300 mpirun --oversubscribe --allow-run-as-root $MPIARGS -np "$N" "$MPI_BENCH" "${sweep[@]}" >>"$log" 2>&1
    elif [ "$v" = auto ]; then
      WEFT_TRANSPORT=$T timeout 300 "$B/tools/weft-run" -n "$N" --bind "$BIND" --no-prefix -- "$B/tools/peers/weft_bench" "${sweep[@]}" >>"$log" 2>&1
    else
      WEFT_ALGO=all_reduce=$v WEFT_TRANSPORT=$T timeout 300 "$B/tools/weft-run" -n "$N" --bind "$BIND" --no-prefix -- "$B/tools/peers/weft_bench" "${sweep[@]}" >>"$log" 2>&1
    fi
  done
done
