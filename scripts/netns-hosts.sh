#!/usr/bin/env bash
# netns-hosts.sh -- runs a command on H emulated hosts: network namespaces joined by a bridge.
#
# weft tells hosts apart by hostname + boot id + network-namespace inode, so processes in two
# namespaces are two hosts to it: their ranks connect over TCP through veth links (optionally
# rate-limited with tc), exactly as across machines, while the test stays on one machine.
#
# Layout for run id ID = weftns-<pid of this script>:
#
#   ID-h0: eth0 10.231.0.1/24 --veth-- p0 \
#   ID-h1: eth0 10.231.0.2/24 --veth-- p1 -- br0 (bridge, in namespace ID-sw)
#   ...                                    /
#
# Everything lives inside namespaces this script creates; nothing is added to the caller's
# namespace (no interface, address or route), so no traffic can leave the emulated network, and
# deleting the namespaces removes every link with them. Parallel runs use their own pid in every
# name, so they do not collide (the same 10.231.0.x addresses in two runs are in different
# namespaces and never meet).
set -uo pipefail

readonly NET=10.231.0       # the private /24 used inside our namespaces only
readonly NAME_RE='^weftns-([0-9]+)-(h[0-9]+|sw)$'
readonly EXIT_SKIP=77       # "skipped": automake's convention, what the tests look for

usage() {
  cat <<'EOF'
usage: netns-hosts.sh [options] -- command [args...]
       netns-hosts.sh --check | --cleanup-stale | --help

Creates H network namespaces ("hosts") weftns-<pid>-h0 .. h<H-1>, each with one veth link
(eth0, 10.231.0.<i+1>/24) to a bridge in namespace weftns-<pid>-sw; runs the command once in
every host, all at the same time; waits for all of them; removes everything again, also when a
command fails, on a timeout and on SIGINT/SIGTERM/SIGHUP.

options:
  --hosts H         number of hosts, 1..8 (default 2)
  --rate R          limit every host's link to R in each direction with tc tbf, e.g. 200mbit,
                    1gbit (units: bit, kbit, mbit, gbit)
  --timeout S       stop every host and exit 124 after S seconds (default 300)
  --no-prefix       pass output through as is (default: lines prefixed "[host i] ")
  --check           exit 0 if this machine can run hosts, else 77 with the reason
  --cleanup-stale   remove weftns-* namespaces left by runs that no longer exist, then exit
  -h, --help        this text

Each host's command gets in its environment:
  HOST_INDEX   0 .. H-1
  HOST_ADDR    this host's address, 10.231.0.<HOST_INDEX+1>
  MASTER_ADDR  host 0's address, 10.231.0.1
  NHOSTS       H

Per-host substitution: in every argument after "--", the words $HOST_INDEX, $HOST_ADDR,
$MASTER_ADDR and $NHOSTS (also written ${NAME}) are replaced by this host's values before the
command runs; nothing else is expanded and no shell is involved, so quoting is kept. Quote them
so that your own shell leaves them alone:

  netns-hosts.sh --hosts 2 --rate 1gbit -- weft-run -n 2 --nnodes '$NHOSTS' \
      --node-rank '$HOST_INDEX' --master-addr '$MASTER_ADDR' --master-port 29500 prog

For anything more, run a shell, which also sees the variables:
  netns-hosts.sh -- sh -c 'echo "host $HOST_INDEX at $HOST_ADDR"'

Exit status: 0 if every host's command exited 0; else the status of the first host that failed
(the others are then stopped at once, as weft-run stops ranks); 124 on --timeout; 77 when it
cannot run here (not root, no iproute2, no network namespaces); 2 on a usage error.
EOF
}

die_usage() {
  echo "netns-hosts: $*" >&2
  echo "netns-hosts: see --help" >&2
  exit 2
}

skip() {
  echo "netns-hosts: SKIP: $*" >&2
  exit "$EXIT_SKIP"
}

# ---- Preconditions -------------------------------------------------------------------------

# Namespaces and links need root (CAP_SYS_ADMIN + CAP_NET_ADMIN) and iproute2; without them the
# caller gets 77, which the tests turn into a skip rather than a failure.
check_can_run() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces (uid $(id -u))"
  command -v ip >/dev/null 2>&1 || skip "'ip' not found (install iproute2)"
  if [ -n "$RATE" ]; then
    command -v tc >/dev/null 2>&1 || skip "'tc' not found (install iproute2)"
  fi
  # A container may be root without the capability: try one namespace and throw it away.
  local probe="weftns-$$-probe" err
  if ! err=$(ip netns add "$probe" 2>&1); then
    skip "cannot create a network namespace: $err"
  fi
  ip netns del "$probe" 2>/dev/null
}

# ---- Option parsing ------------------------------------------------------------------------

HOSTS=2
RATE=""
TIMEOUT=300
PREFIX_OUTPUT=1
MODE=run
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) [ $# -ge 2 ] || die_usage "--hosts needs a value"; HOSTS=$2; shift 2 ;;
    --hosts=*) HOSTS=${1#*=}; shift ;;
    --rate) [ $# -ge 2 ] || die_usage "--rate needs a value"; RATE=$2; shift 2 ;;
    --rate=*) RATE=${1#*=}; shift ;;
    --timeout) [ $# -ge 2 ] || die_usage "--timeout needs a value"; TIMEOUT=$2; shift 2 ;;
    --timeout=*) TIMEOUT=${1#*=}; shift ;;
    --no-prefix) PREFIX_OUTPUT=0; shift ;;
    --check) MODE=check; shift ;;
    --cleanup-stale) MODE=cleanup; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die_usage "unknown option '$1' (the command goes after --)" ;;
  esac
done

[[ $HOSTS =~ ^[1-8]$ ]] || die_usage "--hosts '$HOSTS' is not in 1..8"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die_usage "--timeout '$TIMEOUT' is not a positive integer"

# tbf needs a burst: at least one timer tick's worth of data at the rate, or it cannot reach the
# rate. 10 ms of data (min 16 KiB) is safe for any HZ and still small next to the transfers the
# rate is meant to shape. Hence we parse the rate ourselves instead of passing it through.
RATE_BURST=0
if [ -n "$RATE" ]; then
  [[ $RATE =~ ^([1-9][0-9]*)(bit|kbit|mbit|gbit)$ ]] ||
    die_usage "--rate '$RATE' is not <integer>(bit|kbit|mbit|gbit), e.g. 200mbit"
  case "${BASH_REMATCH[2]}" in
    bit) mult=1 ;; kbit) mult=1000 ;; mbit) mult=1000000 ;; gbit) mult=1000000000 ;;
  esac
  rate_bps=$((BASH_REMATCH[1] * mult))
  RATE_BURST=$((rate_bps / 8 / 100))
  [ "$RATE_BURST" -ge 16384 ] || RATE_BURST=16384
fi

# ---- Stale cleanup -------------------------------------------------------------------------

# Kills every process inside the namespaces given (only processes we started can be in our
# namespaces), politely first: TERM to all, up to 5 s for them to go, then KILL. All namespaces
# at once, so the wait is 5 s at most however many hosts there are.
ns_pids() {
  local ns
  for ns in "$@"; do ip netns pids "$ns" 2>/dev/null; done
}
kill_ns_procs() {
  local pids tries
  pids=$(ns_pids "$@")
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086 # word splitting of the pid list is intended
  kill -TERM $pids 2>/dev/null
  for ((tries = 0; tries < 50; tries++)); do
    pids=$(ns_pids "$@")
    [ -n "$pids" ] || return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
}

# A run is alive while its pid is a netns-hosts.sh process (a recycled pid is something else).
run_alive() {
  local cmdline
  cmdline=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $cmdline == *netns-hosts* ]]
}

cleanup_stale() {
  local ns removed=0
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns =~ $NAME_RE ]] || continue
    run_alive "${BASH_REMATCH[1]}" && continue
    kill_ns_procs "$ns"
    if ip netns del "$ns" 2>/dev/null; then
      echo "netns-hosts: removed stale namespace $ns" >&2
      removed=$((removed + 1))
    fi
  done
  echo "netns-hosts: $removed stale namespace(s) removed" >&2
}

if [ "$MODE" = check ]; then
  check_can_run
  echo "netns-hosts: OK: can create network namespaces"
  exit 0
fi
if [ "$MODE" = cleanup ]; then
  [ "$(id -u)" -eq 0 ] || skip "needs root"
  command -v ip >/dev/null 2>&1 || skip "'ip' not found (install iproute2)"
  cleanup_stale
  exit 0
fi

[ $# -gt 0 ] || die_usage "no command given (put it after --)"
check_can_run

# ---- Setup and teardown --------------------------------------------------------------------

readonly ID="weftns-$$"
CREATED=()   # namespaces made so far, so a setup that fails half way is undone as well
TIMER_PID=""
WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/$ID.XXXXXX") || exit 1

# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
  local ns
  trap '' INT TERM HUP  # a second Ctrl-C must not leave half the namespaces behind
  [ -n "$TIMER_PID" ] && kill "$TIMER_PID" 2>/dev/null
  [ ${#CREATED[@]} -eq 0 ] || kill_ns_procs "${CREATED[@]}"
  for ns in "${CREATED[@]}"; do ip netns del "$ns" 2>/dev/null; done
  CREATED=()
  rm -rf "$WORKDIR"
}
trap cleanup EXIT
# Exit through the EXIT trap with the shell's usual status for the signal.
trap 'echo "netns-hosts: interrupted, cleaning up" >&2; exit 130' INT
trap 'echo "netns-hosts: terminated, cleaning up" >&2; exit 143' TERM
trap 'exit 129' HUP

# Runs a setup step; on failure says which and exits (the EXIT trap removes what exists).
must() {
  local err
  if ! err=$("$@" 2>&1); then
    echo "netns-hosts: setup failed: $*: $err" >&2
    exit 1
  fi
}

add_ns() {
  must ip netns add "$1"
  CREATED+=("$1")
  must ip -n "$1" link set lo up
}

# tbf on an interface's egress; applied on both ends of a veth it limits the link to the rate
# in each direction, like a full-duplex NIC. latency bounds the queue (beyond it tbf drops).
limit() {
  must ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$RATE" burst "$RATE_BURST" \
    latency 50ms
}

SW="$ID-sw"
add_ns "$SW"
must ip -n "$SW" link add br0 type bridge
must ip -n "$SW" link set br0 up
for ((i = 0; i < HOSTS; i++)); do
  ns="$ID-h$i"
  add_ns "$ns"
  # Both ends are created directly inside their namespaces: the caller's namespace never sees
  # them, and names like eth0/p0 cannot collide with its interfaces or with parallel runs.
  must ip -n "$SW" link add "p$i" type veth peer name eth0 netns "$ns"
  must ip -n "$SW" link set "p$i" master br0
  must ip -n "$SW" link set "p$i" up
  must ip -n "$ns" addr add "$NET.$((i + 1))/24" dev eth0
  must ip -n "$ns" link set eth0 up
  if [ -n "$RATE" ]; then
    limit "$ns" eth0
    limit "$SW" "p$i"
  fi
done
echo "netns-hosts: $HOSTS host(s) $ID-h0..h$((HOSTS - 1)) on $NET.0/24${RATE:+, $RATE per link}" >&2

# ---- Running the command -------------------------------------------------------------------

# Sets `subst` to $1 with the words $NAME and ${NAME} replaced by this host's values ($2..$5:
# HOST_INDEX, HOST_ADDR, MASTER_ADDR, NHOSTS). One left-to-right pass, so a value is never
# substituted again; "$NAME" followed by another identifier character ($HOST_ADDRESS) and every
# other "$" are kept as they are. Bounded: each round consumes one "$".
subst_args() {
  local rest=$1 name value matched
  local -A values=([HOST_INDEX]=$2 [HOST_ADDR]=$3 [MASTER_ADDR]=$4 [NHOSTS]=$5)
  subst=""
  while [[ $rest == *'$'* ]]; do
    subst+=${rest%%\$*}
    rest=${rest#*\$}
    matched=0
    for name in "${!values[@]}"; do
      value=${values[$name]}
      if [[ $rest == "{$name}"* ]]; then
        rest=${rest#"{$name}"}
      elif [[ $rest =~ ^$name([^A-Za-z0-9_]|$) ]]; then
        rest=${rest#"$name"}
      else
        continue
      fi
      subst+=$value
      matched=1
      break
    done
    [ "$matched" -eq 1 ] || subst+='$'
  done
  subst+=$rest
}

# Starts host $1's command in the background; its exit status lands in $WORKDIR/rc.$1.
start_host() {
  local i=$1 ns="$ID-h$1" addr="$NET.$(($1 + 1))" arg subst
  local argv=()
  for arg in "${CMD[@]}"; do
    subst_args "$arg" "$i" "$addr" "$NET.1" "$HOSTS"
    argv+=("$subst")
  done
  {
    ip netns exec "$ns" env HOST_INDEX="$i" HOST_ADDR="$addr" MASTER_ADDR="$NET.1" \
      NHOSTS="$HOSTS" "${argv[@]}" </dev/null
    # Written aside and renamed: the loop below may look while this runs, and an empty rc.$i
    # would be read as "done" with no status (a failure then missed).
    echo $? >"$WORKDIR/rc.$i.tmp" && mv "$WORKDIR/rc.$i.tmp" "$WORKDIR/rc.$i"
  } 2>&1 | if [ "$PREFIX_OUTPUT" -eq 1 ]; then sed -u "s/^/[host $i] /"; else cat; fi &
}

CMD=("$@")
for ((i = 0; i < HOSTS; i++)); do start_host "$i"; done
sleep "$TIMEOUT" &
TIMER_PID=$!

# Waits for every host, or the first failure, or the timer. Each `wait -n` returns when one job
# (a host's pipeline or the timer) ends, so this runs at most HOSTS + 1 rounds.
status=0
for ((round = 0; round <= HOSTS; round++)); do
  wait -n
  done_hosts=0
  for ((i = 0; i < HOSTS; i++)); do
    [ -f "$WORKDIR/rc.$i" ] || continue
    done_hosts=$((done_hosts + 1))
    rc=$(cat "$WORKDIR/rc.$i")
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then
      echo "netns-hosts: host $i exited with status $rc; stopping the others" >&2
      status=$rc
    fi
  done
  [ "$status" -ne 0 ] && break
  [ "$done_hosts" -eq "$HOSTS" ] && break
  if ! kill -0 "$TIMER_PID" 2>/dev/null; then
    echo "netns-hosts: timeout after ${TIMEOUT}s; stopping every host" >&2
    status=124
    break
  fi
done

# Stop whatever still runs (after a failure or timeout), then let the output pipelines drain.
hosts_ns=()
for ((i = 0; i < HOSTS; i++)); do hosts_ns+=("$ID-h$i"); done
kill_ns_procs "${hosts_ns[@]}"
kill "$TIMER_PID" 2>/dev/null
wait
exit "$status"
