#!/usr/bin/env bash
# vm_checks.sh -- what each rank does inside the VMs of //tests/rdma:verbs_test: one boot of
# scripts/rdma-vm.sh --hosts 2 --ranks-per-host 2 runs every check in turn, each a weft job of
# some of the four launcher ranks (ranks 0 and 1 on VM 0, 2 and 3 on VM 1).
#
#   vm_checks.sh VM_RANK [IBVERBS_TEST [WEFT_INFO]]
#
# Per check, each rank taking part prints "ok NAME: ..." or "FAIL NAME: ..." (verbs_test.sh looks
# for them), and goes on with the next check whatever happened, so that one failure does not hide
# the others; it exits 0 (rdma-vm.sh stops every VM as soon as one rank exits otherwise). Every
# step is bounded: `timeout` around each program, WEFT_CONNECT_TIMEOUT_MS and WEFT_TIMEOUT_MS
# inside it, and rdma-vm.sh's --timeout around everything.
set -u
rank_bin=${1:?usage: vm_checks.sh VM_RANK [IBVERBS_TEST]}
ib_test=${2:-}
info_bin=${3:-}
me=$RANK
base=${MASTER_PORT:-29500}
port=$base
log=/tmp/check.$me.log  # per rank: two ranks share each VM's /tmp

say() { echo "$*"; }

# job NAME RANKS RC [+REGEX...] [VAR=VALUE...] -- ARGS...: runs vm_rank ARGS as a weft job of the
# launcher ranks in RANKS ("0,1,2,3"; each one's world rank is its place in the list; "self":
# every rank on its own, a world of one) with the variables given. RC is the exit status wanted
# (137 for a rank that SIGKILLs itself); each REGEX (extended) must match a line of its stderr
# (WEFT_DEBUG's). Every job gets a master port of its own, also on ranks not taking part, so that
# the ports stay in step.
job() {
  local name=$1 ranks=$2 want_rc=$3
  shift 3
  local vars=() patterns=()
  while [ $# -gt 0 ] && [ "${1:0:1}" = + ]; do patterns+=("${1:1}"); shift; done
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  port=$((port + 1))
  local world=0 wrank=-1 r
  if [ "$ranks" = self ]; then
    world=1 wrank=0
    vars+=(MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 100 + me)))
  else
    IFS=, read -ra list <<<"$ranks"
    for r in "${list[@]}"; do
      [ "$r" = "$me" ] && wrank=$world
      world=$((world + 1))
    done
    vars+=(MASTER_PORT=$port)
  fi
  [ "$wrank" -ge 0 ] || return 0
  local t0=$EPOCHREALTIME rc
  # The launcher's local rank and size describe all four ranks: a smaller job finds its own.
  env -u LOCAL_RANK -u LOCAL_WORLD_SIZE RANK=$wrank WORLD_SIZE=$world "${vars[@]}" \
    timeout -s KILL 300 "$rank_bin" "$@" >"$log.out" 2>"$log"
  rc=$?
  local took p missing="" why
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  cat "$log.out"
  sed 's/^/  stderr: /' "$log"
  for p in "${patterns[@]}"; do grep -qE "$p" "$log" || missing=$p; done
  if [ "$rc" -ne "$want_rc" ]; then
    why=$(sed -n 's/^vm_rank FAIL [^:]*: //p' "$log.out" | head -1)
    say "FAIL $name: exit status $rc, expected $want_rc ($took s)${why:+: $why}"
  elif [ -n "$missing" ]; then
    say "FAIL $name: no line on stderr matches /$missing/ ($took s)"
  else
    say "ok $name ($took s)"
  fi
}

# WEFT_DEBUG's line for this rank in a job of all four: SAME to the other rank of its host, OTHER
# to both ranks of the other host, e.g. "transport per rank: 0:self 1:shm 2:ib 3:ib".
via() {
  local line="transport per rank:" r
  for r in 0 1 2 3; do
    if [ "$r" = "$me" ]; then
      line+=" $r:self"
    elif [ $((r / 2)) = $((me / 2)) ]; then
      line+=" $r:$1"
    else
      line+=" $r:$2"
    fi
  done
  echo "$line"
}

# The transport's own tests (handshake, slots and credits, backpressure, odd and empty messages,
# many in flight, a killed peer) on VM 0, whose rxe0 loops back; the others wait meanwhile in the
# next job's init, hence its long connect timeout. The two tests for machines without a port are
# left out; nothing else may skip.
if [ "$me" = 0 ] && [ -n "$ib_test" ]; then
  t0=$EPOCHREALTIME
  timeout -s KILL 300 "$ib_test" \
    --gtest_filter=-IbChoice.ForcedWithoutPort*:IbChoice.AutoWithoutPort* >"$log" 2>&1
  rc=$?
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  grep -E '^\[ *(OK|FAILED|SKIPPED) *\]|Failure|Expected|Which is|: error' "$log" | head -60
  if [ "$rc" -ne 0 ]; then
    tail -30 "$log"
    say "FAIL transport: ibverbs_test exit status $rc ($took s)"
  elif grep -q '^\[  SKIPPED \]' "$log"; then
    say "FAIL transport: ibverbs_test skipped tests that need the port ($took s)"
  else
    say "ok transport: $(grep -c '^\[       OK \]' "$log") tests ($took s)"
  fi
fi

# weft-info inside each VM (ranks 0 and 2, one per host): the rdma transport usable, and rxe0's
# port 1 listed ACTIVE, allowed, as RoCE, with an MTU and at least one GID: what the verbs
# transport will use, seen the way a user checks a machine.
if [ -n "$info_bin" ] && [ $((me % 2)) = 0 ]; then
  t0=$EPOCHREALTIME
  timeout -s KILL 120 "$info_bin" --json >"$log.info" 2>"$log"
  rc=$?
  took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  why=$(python3 - "$log.info" <<'PY' 2>&1
import json, sys
d = json.load(open(sys.argv[1]))
rdma = [t for t in d["transports"] if t["name"] == "rdma"]
assert rdma, "no rdma entry among the transports"
r = rdma[0]
assert r["usable"], "rdma not usable: %s" % r.get("why")
ports = [p for p in r["ports"] if p["device"] == "rxe0" and p["port"] == 1]
assert ports, "rxe0 port 1 not listed: %s" % r["ports"]
p = ports[0]
assert p["active"] and p["allowed_by_WEFT_IB_HCA"], p
assert p["link_layer"] == "RoCE", p
assert p["mtu"] >= 1024, p
assert p["gids"], p
print("rxe0:1 RoCE mtu %d, %d GIDs" % (p["mtu"], len(p["gids"])))
PY
  )
  prc=$?
  if [ "$rc" -ne 0 ]; then
    sed 's/^/  stderr: /' "$log"
    say "FAIL info: weft-info --json exit status $rc ($took s)"
  elif [ "$prc" -ne 0 ]; then
    say "FAIL info: $(tail -1 <<<"$why") ($took s)"
  else
    say "ok info: $why ($took s)"
  fi
  # The report as a person reads it, for the test's log.
  [ "$me" = 0 ] && timeout -s KILL 60 "$info_bin" 2>&1 | sed 's/^/  weft-info: /'
fi

export WEFT_TIMEOUT_MS=60000
# The collective matrix over verbs: four ranks on two hosts all over ib (rxe loopback between
# ranks of one host), three (two and one) with shm inside VM 0, two (one each) over ib.
job matrix4 0,1,2,3 0 WEFT_TRANSPORT=ib WEFT_CONNECT_TIMEOUT_MS=240000 -- matrix ib ib --large
job matrix3 0,1,2 0 WEFT_TRANSPORT=auto WEFT_CONNECT_TIMEOUT_MS=120000 -- matrix shm ib
job matrix2 0,2 0 WEFT_TRANSPORT=ib WEFT_CONNECT_TIMEOUT_MS=120000 -- matrix ib ib --large

# Hierarchical all-reduce: shm inside each host, verbs across; WEFT_DEBUG's line shows the
# choice, vm_rank checks what carries each connection.
job hier 0,1,2,3 0 "+$(via shm ib); ib on rxe0 port 1" WEFT_TRANSPORT=auto WEFT_DEBUG=1 \
  WEFT_CONNECT_TIMEOUT_MS=120000 -- hier

# Device buffers across hosts, on the emulated engine (host memory standing in for a GPU; device
# work finishes later on worker threads). With WEFT_IB_GDR=1 the verbs connections carry them
# straight from and into device slots (registered by address here; through a dma-buf on CUDA);
# without it they are staged through pinned host memory. Small device slices and two device slots
# (the stream has 32), so that the device slots wrap many times. Within a host: CUDA IPC.
job gdr 0,1,2,3 0 "+ib on rxe0 port 1.*GPUDirect RDMA \(emulated device memory\)" \
  WEFT_TRANSPORT=auto WEFT_DEVICE=emulated WEFT_IB_GDR=1 WEFT_DEVICE_SLICE_BYTES=65536 \
  WEFT_DEVICE_SLOTS=2 WEFT_DEBUG=1 WEFT_CONNECT_TIMEOUT_MS=120000 -- devmatrix cuda_ipc ib
job staged 0,2 0 WEFT_TRANSPORT=auto WEFT_DEVICE=emulated WEFT_DEVICE_SLICE_BYTES=65536 \
  WEFT_CONNECT_TIMEOUT_MS=120000 -- devmatrix cuda_ipc staged

# No usable port (WEFT_IB_GID_INDEX names no GID of rxe0's, WEFT_IB_HCA names no device):
# WEFT_TRANSPORT=ib fails init saying why, on every rank; auto falls back to TCP across hosts and
# says so.
job ib-gid self 0 WEFT_TRANSPORT=ib WEFT_IB_GID_INDEX=200 -- \
  init-fails 'rank 0' WEFT_TRANSPORT=ib WEFT_IB_GID_INDEX=200 rxe0
job ib-hca self 0 WEFT_TRANSPORT=ib WEFT_IB_HCA==nosuch0 -- \
  init-fails 'rank 0' WEFT_TRANSPORT=ib 'no active RDMA port' 'rxe0:1 (left out by WEFT_IB_HCA)'
job auto-gid 0,1,2,3 0 "+^weft rank $me: .*using tcp across hosts: .*WEFT_IB_GID_INDEX=200" \
  "+$(via shm tcp);" WEFT_TRANSPORT=auto WEFT_IB_GID_INDEX=200 WEFT_DEBUG=1 \
  WEFT_CONNECT_TIMEOUT_MS=60000 -- carried shm tcp
job auto-hca 0,1,2,3 0 "+^weft rank $me: .*using tcp across hosts: .*left out by WEFT_IB_HCA" \
  "+$(via shm tcp);" WEFT_TRANSPORT=auto WEFT_IB_HCA==nosuch0 WEFT_DEBUG=1 \
  WEFT_CONNECT_TIMEOUT_MS=60000 -- carried shm tcp

# A peer SIGKILLed mid-transfer: rank 3 (VM 1) while it receives from rank 1; rank 2 reaches it by
# shm, ranks 0 and 1 by verbs. Every survivor fails naming it, well within WEFT_TIMEOUT_MS.
if [ "$me" = 3 ]; then kill_rc=137; else kill_rc=0; fi
job kill 0,1,2,3 $kill_rc WEFT_TRANSPORT=auto WEFT_TIMEOUT_MS=20000 \
  WEFT_CONNECT_TIMEOUT_MS=60000 -- kill 3 10

# A host that vanishes: VM 1's rank takes eth0 down (no FIN or RST reaches VM 0), so only the
# RDMA retries tell. 4.096 us * 2^14 = 67 ms per try, 3 tries (WEFT_IB_RETRY_CNT=2): the write
# fails about 0.2 s after the link went down; vm_rank's bound adds its 2 s wait and 3 s for TCG.
# WEFT_TIMEOUT_MS is far above that, so a failure by timeout instead misses the bound. (Not
# WEFT_IB_RETRY_CNT=7: Soft-RoCE retries forever at 7.) Last: VM 1 has no network afterwards.
job vanish 0,2 0 WEFT_TRANSPORT=auto WEFT_IB_TIMEOUT=14 WEFT_IB_RETRY_CNT=2 \
  WEFT_TIMEOUT_MS=60000 WEFT_CONNECT_TIMEOUT_MS=60000 -- vanish 3 eth0
exit 0
