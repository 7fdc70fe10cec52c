#!/usr/bin/env bash
# lat.sh BIN OUT ROUNDS [SIZE] -- a 4-rank all-reduce of SIZE (4K) over TCP, 2,000 iterations: weft's
# automatic choice, four algorithms forced, Open MPI over TCP, and the bare-socket floor
# (tools/peers/tcp_latency_floor.c built as FLOOR: a binomial tree and recursive doubling on plain
# loopback sockets, no library), in an order that starts one further along every round.
# BIN: weft's bazel-bin; MPI_BENCH: tools/peers/mpi_bench.c built with mpicc.
B=$1 OUT=$2 ROUNDS=$3 SIZE=${4:-4K}
mkdir -p "$OUT"
vars=(auto linear recursive_doubling tree ring mpi floor_tree floor_rd)
nv=${#vars[@]}
sweep=(-b "$SIZE" -e "$SIZE" -n 2000 -w 50)
for r in $(seq 1 "$ROUNDS"); do
  for k in $(seq 0 $((nv - 1))); do
    v=${vars[$(((r + k) % nv))]}
    log=$OUT/$v.r$r.log
    case $v in
      mpi) timeout 300 mpirun --oversubscribe --allow-run-as-root --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include lo -np 4 "$MPI_BENCH" "${sweep[@]}" >"$log" 2>&1 ;;
      auto) WEFT_TRANSPORT=tcp timeout 300 "$B/tools/weft-run" -n 4 --bind none --no-prefix -- \
        "$B/tools/peers/weft_bench" "${sweep[@]}" >"$log" 2>&1 ;;
      floor_*)
        s=$(numfmt --from=iec "$SIZE")
        echo "$s 1 $("$FLOOR" 4 "$s" 2000 "${v#floor_}" | awk '{print $2}') 0 0 0" >"$log" ;;
      *) WEFT_ALGO=all_reduce=$v WEFT_TRANSPORT=tcp timeout 300 "$B/tools/weft-run" -n 4 --bind none \
        --no-prefix -- "$B/tools/peers/weft_bench" "${sweep[@]}" >"$log" 2>&1 ;;
    esac
  done
done
