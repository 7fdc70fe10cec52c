#!/usr/bin/env bash
# main.sh -- the body of scripts/rdma-vm.sh: runs a command on H emulated hosts that each have a
# real RDMA device: qemu VMs with the Linux kernel's Soft-RoCE driver (rdma_rxe), a RoCE v2
# device on an emulated Ethernet.
#
# Each VM boots Debian's stock kernel (downloaded once with apt-get, unpacked under
# ~/.cache/weft-rdma-vm, nothing installed on this machine) from a small initramfs:
# busybox, init (next to this file) and the modules it needs. The init mounts this machine's root
# file system read-only over 9p, so the same programs, libraries (rdma-core's libibverbs and its
# rxe provider) and paths work inside; it adds rxe0 on eth0 and runs the ranks there.
#
#   VM 0: eth0 10.77.0.1/24 (MTU 9000), rxe0 \
#   VM 1: eth0 10.77.0.2/24 (MTU 9000), rxe0 -- the "wire": qemu socket netdevs on 127.0.0.1
#   ...                                       /
#
# Two VMs are joined by a TCP connection (VM 0 listens, VM 1 connects), which loses nothing:
# qemu stops reading when a guest's NIC is full. More than two share a UDP multicast group
# (a group and port picked per run), which drops frames when a guest falls behind; rxe then
# retransmits (RC's timeouts), so it works but is slower. No traffic leaves this machine.
#
# One VM per host because the 6.1 kernel keeps rxe's UDP sockets in the initial network
# namespace: two rxe devices in one guest cannot talk to each other. Ranks on one host share its
# rxe0 through the device's loopback. The run directory ($TMPDIR/weft-rdma-vm.*) is shared
# read-write at the same path inside: vm.conf, job.sh, each rank's output and exit status.
set -uo pipefail

readonly NET=10.77.0      # the private /24 on the VMs' wire
readonly PROG=rdma-vm

usage() {
  cat <<'EOF'
usage: rdma-vm.sh [options] -- command [args...]

Boots H qemu VMs, each with a Soft-RoCE device rxe0 (RoCE v2 over its eth0), and runs the
command M times on each ("ranks"), all at once, inside this machine's root file system (shared
read-only: paths stay valid; /tmp, /run, /var/tmp and /dev/shm are empty and writable).
Output lines are prefixed "[rank R] ". Stops every VM and removes its files on exit, failure,
timeout and SIGINT/SIGTERM/SIGHUP.

options:
  --hosts H           number of VMs, 1..8 (default 1)
  --ranks-per-host M  ranks on each VM, 1..16 (default 1); they share its rxe0 (loopback)
  --mem MB            memory per VM (default 512)
  --timeout S         stop everything and exit 124 after S seconds, boot included (default 300)
  --accel A           tcg (default; works everywhere) or kvm (faster where nested KVM works)
  -h, --help          this text

Each rank's environment: RANK (host * M + local rank), WORLD_SIZE (H * M), LOCAL_RANK,
LOCAL_WORLD_SIZE (M), MASTER_ADDR (VM 0's address, 10.77.0.1), MASTER_PORT (the caller's, else
29500), WEFT_JOB_ID (the caller's, else one per run), HOST_INDEX, HOST_ADDR (10.77.0.<H+1>),
NHOSTS, every WEFT_* variable the caller exported, PATH, LD_LIBRARY_PATH, HOME; TMPDIR=/tmp.
Its working directory is the caller's.

  rdma-vm.sh -- ibv_devinfo
  rdma-vm.sh --hosts 2 -- sh -c 'if [ $RANK = 0 ]; then ib_write_bw -d rxe0;
                                 else sleep 1; ib_write_bw -d rxe0 $MASTER_ADDR; fi'

Needs qemu-system-x86, rdma-core, ibverbs-providers, busybox-static, kmod, cpio and iproute2;
installs what is missing with apt-get. The kernel is cached in ~/.cache/weft-rdma-vm
($WEFT_RDMA_VM_CACHE to override).

Exit status: 0 if every rank exited 0; else the status of the first rank seen failing (the
others are then stopped); 124 on --timeout; 1 when a VM fails to boot; 2 on a usage error.
Where qemu cannot run at all (no qemu and no way to install it, no kernel), prints
"SKIP: <why>" and exits 0.
EOF
}

die_usage() {
  echo "$PROG: $*" >&2
  echo "$PROG: see --help" >&2
  exit 2
}

skip() {
  echo "SKIP: $*"
  exit 0
}

# ---- Options -------------------------------------------------------------------------------

HOSTS=1
RPH=1
MEM=512
TIMEOUT=300
ACCEL=tcg
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) [ $# -ge 2 ] || die_usage "--hosts needs a value"; HOSTS=$2; shift 2 ;;
    --hosts=*) HOSTS=${1#*=}; shift ;;
    --ranks-per-host) [ $# -ge 2 ] || die_usage "--ranks-per-host needs a value"; RPH=$2; shift 2 ;;
    --ranks-per-host=*) RPH=${1#*=}; shift ;;
    --mem) [ $# -ge 2 ] || die_usage "--mem needs a value"; MEM=$2; shift 2 ;;
    --mem=*) MEM=${1#*=}; shift ;;
    --timeout) [ $# -ge 2 ] || die_usage "--timeout needs a value"; TIMEOUT=$2; shift 2 ;;
    --timeout=*) TIMEOUT=${1#*=}; shift ;;
    --accel) [ $# -ge 2 ] || die_usage "--accel needs a value"; ACCEL=$2; shift 2 ;;
    --accel=*) ACCEL=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die_usage "unknown option '$1' (the command goes after --)" ;;
  esac
done

[[ $HOSTS =~ ^[1-8]$ ]] || die_usage "--hosts '$HOSTS' is not in 1..8"
[[ $RPH =~ ^([1-9]|1[0-6])$ ]] || die_usage "--ranks-per-host '$RPH' is not in 1..16"
[[ $MEM =~ ^[1-9][0-9]*$ ]] && [ "$MEM" -ge 128 ] || die_usage "--mem '$MEM' is not a number >= 128"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die_usage "--timeout '$TIMEOUT' is not a positive integer"
[[ $ACCEL =~ ^(tcg|kvm)$ ]] || die_usage "--accel '$ACCEL' is not tcg or kvm"
[ $# -gt 0 ] || die_usage "no command given (put it after --)"
CMD=("$@")
# The guests' /tmp, /run, /var/tmp and /dev/shm are their own (empty): a path there on this machine
# does not exist inside. Said here, rather than as "No such file" from every rank.
for arg in "$PWD" "${CMD[@]}"; do
  if [[ $arg =~ ^/(tmp|run|var/tmp|dev/shm)(/|$) ]] && [ -e "$arg" ]; then
    [ "$arg" = "$PWD" ] && what="the working directory" || what="'$arg'"
    die_usage "$what is under /${BASH_REMATCH[1]}, which the VMs do not share (theirs is their own): use a path elsewhere"
  fi
done

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
INIT="$SCRIPT_DIR/init"
[ -r "$INIT" ] || { echo "$PROG: missing $INIT" >&2; exit 1; }

# ---- Packages ------------------------------------------------------------------------------

# Installs the Debian packages that are missing. Without root, or where apt-get fails, the run
# goes on: whatever is still missing then either skips (qemu, the kernel) or fails in the guest.
install_missing() {
  local need=() p
  for p in qemu-system-x86 rdma-core ibverbs-providers ibverbs-utils libibverbs-dev perftest \
    busybox-static kmod cpio iproute2; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || {
      echo "$PROG: missing ${need[*]} (not root: install them yourself)" >&2
      return 1
    }
    sudo="sudo -n"
  fi
  echo "$PROG: installing ${need[*]}" >&2
  if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
    "${need[@]}" >/dev/null 2>&1; then
    $sudo apt-get update -q >/dev/null 2>&1
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
      "${need[@]}" >/dev/null || return 1
  fi
}

install_missing || echo "$PROG: could not install every package; trying anyway" >&2
command -v qemu-system-x86_64 >/dev/null 2>&1 ||
  skip "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
BUSYBOX=$(command -v busybox) || skip "busybox not found (apt-get install busybox-static)"
# The initramfs has no libraries: busybox must be the static build.
if ldd "$BUSYBOX" >/dev/null 2>&1; then
  skip "$BUSYBOX is dynamically linked (apt-get install busybox-static)"
fi
command -v cpio >/dev/null 2>&1 || skip "cpio not found (apt-get install cpio)"
for t in rdma ibv_devinfo; do
  command -v "$t" >/dev/null 2>&1 || echo "$PROG: warning: '$t' not found; the guests need it" >&2
done

# ---- Kernel --------------------------------------------------------------------------------

# The user's own cache, also under Bazel (which points HOME at the test's temporary directory).
real_home=$(getent passwd "$(id -u)" | cut -d: -f6)
CACHE=${WEFT_RDMA_VM_CACHE:-${real_home:-$HOME}/.cache/weft-rdma-vm}

# Modules the guest loads, with their dependencies: virtio for the disk-less VM's network and
# 9p shares, rxe (crc32_generic first: rxe asks the crypto API for "crc32" when it starts), and
# the RDMA connection manager for programs that connect through librdmacm.
readonly GUEST_MODULES="virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe rdma_ucm"

# The kernel package: the one Debian's linux-image-amd64 points to, else the newest 6.x
# linux-image-*-amd64 that apt knows.
kernel_package() {
  local pkg
  pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -1)
  [ -n "$pkg" ] || pkg=$(apt-cache search --names-only '^linux-image-[0-9.]+-[0-9]+-amd64$' \
    2>/dev/null | awk '{print $1}' | sort -V | tail -1)
  echo "$pkg"
}

# Fills $CACHE/<package>/: vmlinuz, modules/*.ko (uncompressed) and modules.order (load order).
# Done in a temporary directory and renamed at the end, so an interrupted download leaves
# nothing half made and two runs at once do not trip over each other.
fetch_kernel() {
  local pkg=$1 dest="$CACHE/$1" tmp deb kver m ko base
  mkdir -p "$CACHE" || return 1
  tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX") || return 1
  echo "$PROG: downloading $pkg into $CACHE (once)" >&2
  if ! (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1); then
    # A stale package list names versions the mirror no longer has.
    if [ "$(id -u)" -eq 0 ]; then apt-get update -q >/dev/null 2>&1; fi
    (cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1) ||
      { echo "$PROG: apt-get download $pkg failed" >&2; rm -rf "$tmp"; return 1; }
  fi
  deb=$(ls "$tmp"/*.deb)
  dpkg -x "$deb" "$tmp/root" || { rm -rf "$tmp"; return 1; }
  kver=$(ls "$tmp/root/lib/modules" | head -1)
  depmod -b "$tmp/root" "$kver" || { rm -rf "$tmp"; return 1; }
  mkdir -p "$tmp/out/modules"
  cp "$tmp/root/boot/vmlinuz-$kver" "$tmp/out/vmlinuz" || { rm -rf "$tmp"; return 1; }
  cp "$tmp/root/boot/config-$kver" "$tmp/out/config" 2>/dev/null
  : >"$tmp/out/modules.order"
  for m in $GUEST_MODULES; do
    if ! modprobe -d "$tmp/root" -S "$kver" --show-depends "$m" >"$tmp/deps" 2>&1; then
      echo "$PROG: $pkg has no module $m: $(cat "$tmp/deps")" >&2
      rm -rf "$tmp"
      return 1
    fi
    # "insmod /path/x.ko" lines in load order; "builtin x" needs nothing.
    for ko in $(sed -n 's/^insmod \([^ ]*\).*/\1/p' "$tmp/deps"); do
      base=$(basename "$ko")
      base=${base%.xz}
      base=${base%.zst}
      base=${base%.gz}
      grep -qx "$base" "$tmp/out/modules.order" && continue
      case "$ko" in
        *.xz) xz -dc "$ko" >"$tmp/out/modules/$base" ;;
        *.zst) zstd -qdc "$ko" >"$tmp/out/modules/$base" ;;
        *.gz) gzip -dc "$ko" >"$tmp/out/modules/$base" ;;
        *) cp "$ko" "$tmp/out/modules/$base" ;;
      esac || { echo "$PROG: cannot unpack $ko" >&2; rm -rf "$tmp"; return 1; }
      echo "$base" >>"$tmp/out/modules.order"
    done
  done
  echo "$kver" >"$tmp/out/release"
  rm -rf "$dest"
  mv "$tmp/out" "$dest" && rm -rf "$tmp"
}

# The uncompressed kernel (ELF vmlinux) out of the bzImage, next to it. qemu boots it directly
# through its PVH entry point: that skips the kernel decompressing itself, which takes 5 to 20 s
# under TCG, more than the rest of the boot. Without one (no PVH entry, an unknown compression)
# the bzImage boots as usual.
extract_vmlinux() {
  local kdir=$1 off tmp
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$kdir/vmlinuz" 2>/dev/null | head -1 | cut -d: -f1)
  [ -n "$off" ] || return 1
  tmp=$(mktemp "$kdir/.vmlinux.XXXXXX") || return 1
  tail -c +$((off + 1)) "$kdir/vmlinuz" | xz -dc --single-stream >"$tmp" 2>/dev/null
  # An ELF file with Xen's PVH note (XEN_ELFNOTE_PHYS32_ENTRY), which qemu needs for -kernel.
  if [ "$(head -c 4 "$tmp" | od -An -c | tr -d ' ')" = '177ELF' ] &&
    LC_ALL=C grep -qaF 'Xen' "$tmp"; then
    chmod 644 "$tmp" && mv "$tmp" "$kdir/vmlinux"
  else
    rm -f "$tmp"
    return 1
  fi
}

# A kernel already in the cache is used as it is (runs stay offline); else fetch one.
KDIR=""
for d in $(ls -d "$CACHE"/linux-image-* 2>/dev/null | sort -V -r); do
  [ -f "$d/release" ] && { KDIR=$d; break; }
done
if [ -z "$KDIR" ]; then
  command -v apt-get >/dev/null 2>&1 || skip "no kernel in $CACHE and no apt-get to fetch one"
  command -v depmod >/dev/null 2>&1 || skip "depmod not found (apt-get install kmod)"
  pkg=$(kernel_package)
  [ -n "$pkg" ] || skip "apt knows no linux-image-*-amd64 package to boot"
  fetch_kernel "$pkg" || skip "could not fetch the kernel package $pkg"
  KDIR="$CACHE/$pkg"
fi
[ -f "$KDIR/vmlinux" ] || [ -f "$KDIR/no-vmlinux" ] || extract_vmlinux "$KDIR" ||
  : >"$KDIR/no-vmlinux"
KERNEL="$KDIR/vmlinuz"
[ -f "$KDIR/vmlinux" ] && KERNEL="$KDIR/vmlinux"

# ---- Run directory, teardown ---------------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/weft-rdma-vm.XXXXXX") || exit 1
RUN="$WORK/run"
mkdir -p "$RUN" "$WORK/initrd"
# The guest finds the run directory by its path on the kernel command line: keep it plain.
if [[ ! $RUN =~ ^[A-Za-z0-9/._-]+$ ]]; then
  rm -rf "$WORK"
  WORK=$(mktemp -d /tmp/weft-rdma-vm.XXXXXX) || exit 1
  RUN="$WORK/run"
  mkdir -p "$RUN" "$WORK/initrd"
fi

QEMU_PIDS=()
TAIL_PIDS=()
TIMER_PID=""
KEEPER_PID=""

# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
  local p
  trap '' INT TERM HUP  # a second Ctrl-C must not leave VMs behind
  for p in "${QEMU_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  [ -n "$TIMER_PID" ] && kill "$TIMER_PID" 2>/dev/null
  [ -n "$KEEPER_PID" ] && kill "$KEEPER_PID" 2>/dev/null
  for p in "${TAIL_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "$PROG: interrupted, cleaning up" >&2; exit 130' INT
trap 'echo "$PROG: terminated, cleaning up" >&2; exit 143' TERM
trap 'exit 129' HUP

# ---- The guests' files ---------------------------------------------------------------------

# initramfs: busybox, init, the modules in load order.
mkdir -p "$WORK/initrd/bin" "$WORK/initrd/modules"
cp "$BUSYBOX" "$WORK/initrd/bin/busybox"
cp "$INIT" "$WORK/initrd/init"
chmod 755 "$WORK/initrd/init" "$WORK/initrd/bin/busybox"
cp "$KDIR"/modules/*.ko "$WORK/initrd/modules/"
cp "$KDIR/modules.order" "$WORK/initrd/modules.order"
(cd "$WORK/initrd" && find . | cpio -o -H newc --quiet) >"$WORK/initrd.cpio" ||
  { echo "$PROG: cannot build the initramfs" >&2; exit 1; }

cat >"$RUN/vm.conf" <<EOF
NET=$NET
MTU=9000
HOSTS=$HOSTS
RANKS_PER_HOST=$RPH
EOF

# job.sh: one rank, run by the guest as "bash job.sh HOST LOCAL_RANK" inside the host's root.
# Written with printf %q by this bash for that same bash, so every value and argument arrives
# exactly as given here.
q() { printf '%q' "$1"; }
{
  echo '#!/bin/bash'
  echo 'host=$1 local_rank=$2'
  echo "rank=\$((host * $RPH + local_rank))"
  # The caller's WEFT_* and a few general ones; then the launcher's variables over them.
  while IFS= read -r name; do
    [[ $name =~ ^WEFT_[A-Za-z0-9_]*$ ]] || continue
    echo "export $name=$(q "${!name}")"
  done < <(compgen -e)
  for name in PATH LD_LIBRARY_PATH HOME LANG LC_ALL; do
    [ -n "${!name+x}" ] && echo "export $name=$(q "${!name}")"
  done
  echo "export TMPDIR=/tmp"
  echo "export RANK=\$rank LOCAL_RANK=\$local_rank WORLD_SIZE=$((HOSTS * RPH))"
  echo "export LOCAL_WORLD_SIZE=$RPH MASTER_ADDR=$NET.1 MASTER_PORT=$(q "${MASTER_PORT:-29500}")"
  echo "export WEFT_JOB_ID=$(q "${WEFT_JOB_ID:-rdma-vm-$$-$(date +%s)}")"
  echo "export HOST_INDEX=\$host HOST_ADDR=$NET.\$((host + 1)) NHOSTS=$HOSTS"
  echo "cd $(q "$PWD") 2>/dev/null || cd /"
  printf '%s' 'exec </dev/null >'"$(q "$RUN")"'/out.$rank 2>&1'
  echo
  printf '%q ' "${CMD[@]}"
  echo
  echo 'rc=$?'
  echo "echo \$rc >$(q "$RUN")/rc.\$rank.tmp && mv $(q "$RUN")/rc.\$rank.tmp $(q "$RUN")/rc.\$rank"
} >"$RUN/job.sh"

# ---- Boot ----------------------------------------------------------------------------------

# The VMs' wire (see the top of this file): for two VMs a TCP connection, on a port free now;
# for more, a UDP multicast group on the loopback interface. Both picked at random per run, so
# that parallel runs, which use the same 10.77.0.x addresses, do not meet.
MCAST="239.255.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1)):$((RANDOM % 20000 + 30000))"
for _ in $(seq 20); do
  TCP_PORT=$((RANDOM % 20000 + 30000))
  ss -Hltn "sport = :$TCP_PORT" 2>/dev/null | grep -q . || break
done
netdev_for() {
  if [ "$HOSTS" -ne 2 ]; then
    echo "socket,id=n0,mcast=$MCAST,localaddr=127.0.0.1"
  elif [ "$1" -eq 0 ]; then
    echo "socket,id=n0,listen=127.0.0.1:$TCP_PORT"
  else
    echo "socket,id=n0,connect=127.0.0.1:$TCP_PORT"
  fi
}

if [ "$ACCEL" = kvm ]; then
  [ -w /dev/kvm ] || die_usage "--accel kvm: /dev/kvm is not usable here"
  ACCEL_ARGS=(-accel kvm -cpu host)
else
  # "max": every instruction TCG emulates (AVX2 included), so binaries built for this
  # machine run inside.
  ACCEL_ARGS=(-accel tcg -cpu max)
fi

start_vm() {
  local h=$1
  qemu-system-x86_64 "${ACCEL_ARGS[@]}" -machine q35 -smp 1 -m "$MEM" \
    -nodefaults -display none -no-reboot -monitor none \
    -serial "file:$WORK/console.$h" \
    -kernel "$KERNEL" -initrd "$WORK/initrd.cpio" \
    -append "console=ttyS0 panic=-1 loglevel=4 mitigations=off weft_host=$h weft_run=$RUN" \
    -fsdev "local,id=fs0,path=/,security_model=none,readonly=on,multidevs=remap" \
    -device virtio-9p-pci,fsdev=fs0,mount_tag=hostroot \
    -fsdev "local,id=fs1,path=$RUN,security_model=none" \
    -device virtio-9p-pci,fsdev=fs1,mount_tag=run \
    -netdev "$(netdev_for "$h")" \
    -device "virtio-net-pci,netdev=n0,mac=52:54:00:77:00:$(printf '%02x' $((h + 1)))" \
    >"$WORK/qemu.$h" 2>&1 </dev/null &
  QEMU_PIDS[h]=$!
}

T0=$EPOCHREALTIME
for ((h = 0; h < HOSTS; h++)); do
  start_vm "$h"
  # VM 1 connects to VM 0's socket: qemu gives up at once if nobody listens yet.
  if [ "$HOSTS" -eq 2 ] && [ "$h" -eq 0 ]; then
    for _ in $(seq 100); do
      ss -Hltn "sport = :$TCP_PORT" | grep -q . && break
      sleep 0.05
    done
  fi
done
sleep "$TIMEOUT" &
TIMER_PID=$!
echo "$PROG: $HOSTS VM(s) x $RPH rank(s), $ACCEL, kernel $(cat "$KDIR/release"), ${MEM} MB each" >&2

# Output: one tail per rank from the start (the files appear when the ranks start). They end
# after a last read once the keeper process is gone, so nothing printed is lost.
sleep 1000000 &
KEEPER_PID=$!
NRANKS=$((HOSTS * RPH))
for ((r = 0; r < NRANKS; r++)); do
  tail -n +1 -F -s 0.2 --pid="$KEEPER_PID" "$RUN/out.$r" 2>/dev/null |
    sed -u "s/^/[rank $r] /" &
  TAIL_PIDS+=($!)
done

# ---- Wait ----------------------------------------------------------------------------------

console_tail() {
  echo "$PROG: VM $1's console (last lines):" >&2
  tail -n 25 "$WORK/console.$1" 2>/dev/null | sed "s/^/  /" >&2
  [ -s "$WORK/qemu.$1" ] && sed "s/^/  qemu: /" "$WORK/qemu.$1" >&2
}

status=0
booted=()
while :; do
  done_ranks=0
  for ((r = 0; r < NRANKS; r++)); do
    [ -f "$RUN/rc.$r" ] || continue
    done_ranks=$((done_ranks + 1))
    rc=$(cat "$RUN/rc.$r")
    if [ "$rc" != 0 ] && [ "$status" -eq 0 ]; then
      echo "$PROG: rank $r (VM $((r / RPH))) exited with status $rc; stopping the others" >&2
      status=$rc
    fi
  done
  for ((h = 0; h < HOSTS; h++)); do
    if [ -z "${booted[h]:-}" ] && [ -f "$RUN/ready.$h" ]; then
      booted[h]=1
      awk -v t0="$T0" -v t1="$EPOCHREALTIME" -v h="$h" -v p="$PROG" \
        'BEGIN { printf "%s: VM %d up after %.1f s\n", p, h, t1 - t0 }' >&2
    fi
  done
  [ "$status" -ne 0 ] && break
  [ "$done_ranks" -eq "$NRANKS" ] && break
  # A VM that is gone before all its ranks finished: it failed to boot, or crashed.
  for ((h = 0; h < HOSTS; h++)); do
    kill -0 "${QEMU_PIDS[h]}" 2>/dev/null && continue
    missing=0
    for ((r = h * RPH; r < (h + 1) * RPH; r++)); do [ -f "$RUN/rc.$r" ] || missing=1; done
    [ "$missing" -eq 1 ] || continue
    # Its last rank may have written rc just before poweroff: look once more.
    sleep 0.2
    for ((r = h * RPH; r < (h + 1) * RPH; r++)); do [ -f "$RUN/rc.$r" ] || missing=2; done
    [ "$missing" -eq 2 ] || continue
    if [ -f "$RUN/failed.$h" ]; then
      echo "$PROG: VM $h failed: $(cat "$RUN/failed.$h")" >&2
    else
      echo "$PROG: VM $h stopped before its ranks finished" >&2
    fi
    console_tail "$h"
    status=1
    break
  done
  [ "$status" -ne 0 ] && break
  if ! kill -0 "$TIMER_PID" 2>/dev/null; then
    echo "$PROG: timeout after ${TIMEOUT}s; stopping every VM" >&2
    for ((r = 0; r < NRANKS; r++)); do
      [ -f "$RUN/rc.$r" ] || echo "$PROG: rank $r (VM $((r / RPH))) did not finish" >&2
    done
    for ((h = 0; h < HOSTS; h++)); do
      [ -n "${booted[h]:-}" ] || { echo "$PROG: VM $h never came up" >&2; console_tail "$h"; }
    done
    status=124
    break
  fi
  sleep 0.2
done

# Let the tails print what is left, then stop the VMs (powered off already, after a success).
kill "$KEEPER_PID" 2>/dev/null
for p in "${TAIL_PIDS[@]}"; do wait "$p" 2>/dev/null; done
TAIL_PIDS=()
for ((h = 0; h < HOSTS; h++)); do
  # A guest powers off right after its ranks; give it a moment before killing it.
  for ((i = 0; i < 20 && status == 0; i++)); do
    kill -0 "${QEMU_PIDS[h]}" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "${QEMU_PIDS[h]}" 2>/dev/null
done
exit "$status"
