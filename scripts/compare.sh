#!/usr/bin/env bash
# compare.sh -- float32 sum all-reduce: weft (tcp, shm, auto) next to Gloo and Open MPI on this machine.
# Usage: scripts/compare.sh [--ranks 2,4] [--min 4K] [--max 64M] [--iters 20] [--repeat 1] [--out DIR]
# --repeat N runs the whole set N times in turn and reports each point's median over the runs:
# on a small shared machine one run's points can be 2x off.
# Writes DIR (default results/<date>-compare/): compare.csv (busbw in GB/s), compare.png, limits.txt, raw/*.log.
set -euo pipefail
cd "$(dirname "$0")/.."

ranks=2,4 min=4K max=64M iters=20 repeat=1 out=results/$(date +%F)-compare
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2 ;;
    --min) min=$2 ;;
    --max) max=$2 ;;
    --iters) iters=$2 ;;
    --out) out=$2 ;;
    --repeat) repeat=$2 ;;
    *) echo "usage: $0 [--ranks 2,4] [--min 4K] [--max 64M] [--iters 20] [--repeat 1] [--out DIR]" >&2; exit 2 ;;
  esac
  shift 2
done

# --- install (Debian only, skipped when present) ---------------------------------------------
scripts/install-deps.sh
need=()
[ -f /usr/include/gloo/allreduce_ring.h ] || need+=(libgloo-dev)
command -v mpicc >/dev/null || need+=(libopenmpi-dev)
command -v mpirun >/dev/null || need+=(openmpi-bin)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "compare: installing ${need[*]}" >&2
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

# --- build --------------------------------------------------------------------------------------
# Own output base and no symlinks: other builds of this checkout may run at the same time.
bazel=(bazel --output_base="${HOME}/.cache/bazel-peers")
"${bazel[@]}" build -c opt --symlink_prefix=/ //tools:weft-run //tools/peers:weft_bench //tools/peers:reduce_bw
wbin=$("${bazel[@]}" info -c opt bazel-bin 2>/dev/null)
bin=$(mktemp -d "${TMPDIR:-/tmp}/weft-compare.XXXXXX")
trap 'rm -rf "$bin"' EXIT
p=tools/peers
g++ -O2 -std=c++17 -Wall -Wextra -o "$bin/gloo_bench" $p/gloo_bench.cc -L/usr/lib -lgloo -lpthread
mpicc -O2 -Wall -Wextra -o "$bin/mpi_bench" $p/mpi_bench.c
gcc -O2 -Wall -Wextra -o "$bin/memcpy_bw" $p/memcpy_bw.c
gcc -O2 -Wall -Wextra -o "$bin/tcp_loopback" $p/tcp_loopback.c
gcc -O2 -Wall -Wextra -o "$bin/tcp_latency_floor" $p/tcp_latency_floor.c
gcc -O3 -Wall -Wextra -o "$bin/shm_floor" $p/shm_floor.c

mkdir -p "$out/raw"
sweep=(-b "$min" -e "$max" -n "$iters" -w 3)

# --- this machine's limits (median of 3 runs each) ------------------------------------------------
median3() { sort -g | sed -n 2p; }
peer_size() { numfmt --from=iec "$1"; } # 4K -> 4096, as the drivers read sizes
memcpy_bw=$(for i in 1 2 3; do "$bin/memcpy_bw" | awk '{print $2}'; done | median3)
reduce_bw=$(for i in 1 2 3; do "$wbin/tools/peers/reduce_bw" | awk '{print $2}'; done | median3)
tcp_run=$(for i in 1 2 3; do "$bin/tcp_loopback" | awk '{print $2, $4}'; done | median3)
tcp_bw=${tcp_run% *} tcp_cores=${tcp_run#* }
cold_run=$(for i in 1 2 3; do "$bin/tcp_loopback" cold | awk '{print $2, $4}'; done | median3)
cold_bw=${cold_run% *} cold_cores=${cold_run#* }
{
  echo "date $(date -Is)  host $(hostname)  cores $(nproc)  load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "kernel $(uname -r)  gloo $(dpkg-query -W -f='${Version}' libgloo-dev)  openmpi $(dpkg-query -W -f='${Version}' openmpi-bin)"
  echo "memcpy_GBps $memcpy_bw   (one thread, 256 MiB buffers, median of 9, median of 3 runs)"
  echo "reduce_GBps $reduce_bw   (weft's float32 sum into 256 MiB buffers from a 64 KiB slice, median of 9, median of 3 runs)"
  echo "tcp_loopback_GBps $tcp_bw cores_busy $tcp_cores   (one stream, 1 GiB through 127.0.0.1, median of 3 runs)"
  echo "tcp_loopback_cold_GBps $cold_bw cores_busy $cold_cores   (the same from and into 256 MiB buffers, median of 3 runs)"
} | tee "$out/limits.txt"

# The fastest the smallest size can go over bare loopback sockets, per rank count (powers of two):
# the fastest of three schedules (recursive doubling, a star through rank 0, a binomial tree),
# each with yielding polls, median of 3 runs each.
: >"$out/floor.txt"
for n in ${ranks//,/ }; do
  [ $((n & (n - 1))) -eq 0 ] || continue
  best=
  for sched in rd star tree; do
    us=$(for i in 1 2 3; do "$bin/tcp_latency_floor" "$n" "$(peer_size "$min")" 2000 "$sched" | awk '{print $2}'; done | median3)
    echo "tcp_floor_us ${n}ranks $sched $us" >>"$out/limits.txt"
    if [ -z "$best" ] || awk -v a="$us" -v b="${best% *}" 'BEGIN { exit !(a < b) }'; then best="$us $sched"; fi
  done
  echo "$n ${best% *}" >>"$out/floor.txt"
  echo "tcp_floor_us ${n}ranks ${best% *}   (the fastest schedule, ${best#* }, of $min on bare loopback sockets, yielding polls, median of 3 runs)" | tee -a "$out/limits.txt"
done

# The least memory work of an all-reduce between local ranks (shm_floor.c), per rank count and
# size from 1 MiB up: an upper bound on any library's busbw over shared memory.
: >"$out/shm_floor.txt"
lo=$(peer_size "$min") hi=$(peer_size "$max")
((lo >= 1048576)) || lo=1048576
for n in ${ranks//,/ }; do
  for ((b = lo; b <= hi; b *= 2)); do
    gbps=$(for i in 1 2 3; do "$bin/shm_floor" "$n" "$b" | awk '{print $2}'; done | median3)
    echo "$n $b $gbps" >>"$out/shm_floor.txt"
  done
done
echo "shm_floor: busbw bound per rank count and size in shm_floor.txt (each rank reads and writes its buffer once, all at once, median of 3 runs)" | tee -a "$out/limits.txt"

# --- does this weft know WEFT_TRANSPORT? ----------------------------------------------------------
# Known if a bogus value makes init fail, or the name is compiled in at all; otherwise setting it
# changes nothing and the tcp/shm columns would only repeat auto, so they become n/a.
# A core per rank where they fit, as mpirun binds (docs/launching.md, --bind).
# WEFT_DEBUG=1 puts each rank's setup (transport per peer, cost model) in the log, for a run that
# stands out.
run_weft() {
  local bind=none
  [ "$1" -le "$(nproc)" ] && bind=core
  WEFT_DEBUG=1 timeout 300 "$wbin/tools/weft-run" -n "$1" --bind $bind --no-prefix -- "$wbin/tools/peers/weft_bench" "${@:2}"
}
knob=no
if grep -q WEFT_TRANSPORT "$wbin/tools/peers/weft_bench" ||
   ! WEFT_TRANSPORT=no-such-transport run_weft 2 -b 4K -e 4K -n 1 -w 0 >/dev/null 2>&1; then
  knob=yes
fi
echo "weft_knows_WEFT_TRANSPORT $knob" | tee -a "$out/limits.txt"
echo "weft_binding a core per rank where ranks <= $(nproc) cores (weft-run --bind core), else none" | tee -a "$out/limits.txt"

# --- runs: one log per library/variant/rank count; a failed run is kept and becomes n/a ----------
mpi=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
# One run of one series at n ranks into its log.
run_series() { # series n log
  local s=$1 n=$2 log=$3
  echo "# started $(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg)" >"$log"
  case $s in
    weft-auto) PEER_VARIANT=auto run_weft "$n" "${sweep[@]}" ;;
    weft-tcp | weft-shm)
      if [ $knob = no ]; then
        echo "# n/a: this weft ignores WEFT_TRANSPORT"
        return
      fi
      PEER_VARIANT=${s#weft-} WEFT_TRANSPORT=${s#weft-} run_weft "$n" "${sweep[@]}" ;;
    gloo) # fresh FileStore per run, ranks started here (RANK/WORLD_SIZE), all three algorithms
      local store pids=() r ok=1
      store=$(mktemp -d "$bin/store.XXXXXX")
      for ((r = 0; r < n; r++)); do
        RANK=$r WORLD_SIZE=$n GLOO_STORE_DIR=$store timeout 300 "$bin/gloo_bench" "${sweep[@]}" \
          >"$bin/gloo_$r.log" 2>&1 & pids+=($!)
      done
      for r in "${pids[@]}"; do wait "$r" || ok=0; done
      cat "$bin"/gloo_*.log
      rm -f "$bin"/gloo_*.log
      [ $ok = 1 ] ;;
    # Open MPI: its defaults (shared memory between local ranks), and TCP only over loopback.
    mpi-default) PEER_VARIANT=default timeout 300 "${mpi[@]}" -np "$n" "$bin/mpi_bench" "${sweep[@]}" ;;
    mpi-tcp)
      PEER_VARIANT=tcp timeout 300 "${mpi[@]}" --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include lo -np "$n" "$bin/mpi_bench" "${sweep[@]}" ;;
  esac >>"$log" 2>&1 || echo "# FAILED" >>"$log"
  echo "# ended $(date +%T)" >>"$log"
}
# Each repeat runs every series once per rank count, starting one series further along each time,
# so that a slow phase of the host (minutes long on a shared VM) falls on different series in
# different repeats instead of on the same one every time; and every other repeat in reverse, so
# that no series always runs right after the same one (whatever a run leaves behind, the next
# one pays: in a plain rotation weft-auto always followed mpi-tcp).
series=(weft-auto weft-tcp weft-shm gloo mpi-default mpi-tcp)
ns=${#series[@]}
for ((rep = 1; rep <= repeat; rep++)); do
  for n in ${ranks//,/ }; do
    echo "compare: $n ranks, run $rep of $repeat" >&2
    for ((k = 0; k < ns; k++)); do
      if ((rep % 2)); then
        s=${series[$(((rep - 1 + k) % ns))]}
      else
        s=${series[$(((rep - 1 - k + ns) % ns))]}
      fi
      run_series "$s" "$n" "$out/raw/${s}_${n}ranks.r${rep}.log"
    done
  done
done

# --- table, limits formula and plot ---------------------------------------------------------------
python3 $p/compare_table.py "$out" "$memcpy_bw" "$reduce_bw" "$tcp_bw" "$tcp_cores" "$(nproc)" "$knob" "$out/floor.txt" "$cold_bw" "$cold_cores" "$out/shm_floor.txt" | tee "$out/table.txt"
gnuplot -e "csv='$out/compare.csv'; png='$out/compare.png'; ranks='${ranks//,/ }'" $p/compare.gp
echo "compare: wrote $out/{compare.csv,compare.png,table.txt,limits.txt,raw/}" >&2
