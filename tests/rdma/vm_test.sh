#!/usr/bin/env bash
# vm_test.sh -- scripts/rdma-vm.sh end to end: two VMs, a rank on each; every rank sees an ACTIVE
# RoCE port on its own host, with its own name, address and the launcher's variables, and the
# run leaves nothing behind. One boot only (half a minute under TCG on two cores). Passes with
# SKIP where qemu cannot run.
set -uo pipefail

script=$(realpath "${1:?usage: vm_test.sh path/to/scripts/rdma-vm/main.sh}")
# The ranks start in the caller's directory, which must be visible in the guests: not in a /tmp
# checkout (their /tmp is their own).
cd / || exit 1
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The run's files go to a directory of this test's own (rdma-vm.sh puts its run directory under
# $TMPDIR), so that what it leaves behind is told apart from other runs on the machine.
base=${TEST_TMPDIR:-${TMPDIR:-/tmp}}
[[ $base =~ ^[A-Za-z0-9/._-]+$ ]] || base=/tmp
own=$(mktemp -d "$base/weft-rdma-test.XXXXXX") || exit 1
trap 'rm -rf "$own"' EXIT
leftovers() {
  ls -A "$own"
  pgrep -f "qemu-system.*weft_run=$own/" 2>/dev/null
}

# Each rank: its rxe0 port ACTIVE on Ethernet (RoCE), its host name and address.
probe='ibv_devinfo -d rxe0 >/tmp/info.$RANK || exit 1
grep -q "state:.*PORT_ACTIVE" /tmp/info.$RANK || { cat /tmp/info.$RANK; exit 1; }
grep -q "link_layer:.*Ethernet" /tmp/info.$RANK || { cat /tmp/info.$RANK; exit 1; }
echo "active host=$(hostname) addr=$HOST_ADDR world=$WORLD_SIZE" \
  "local=$LOCAL_RANK/$LOCAL_WORLD_SIZE job=$WEFT_JOB_ID"'

out=$(TMPDIR=$own WEFT_JOB_ID=vmtest "$script" --hosts 2 --timeout 120 -- sh -c "$probe" 2>&1)
rc=$?
echo "$out"
if grep -q "^SKIP:" <<<"$out"; then
  [ "$rc" -eq 0 ] || fail "SKIP with exit status $rc"
  exit "$failures"
fi
[ "$rc" -eq 0 ] || fail "--hosts 2 ibv_devinfo: exit status $rc"
for r in 0 1; do
  want="[rank $r] active host=weft-vm$r addr=10.77.0.$((r + 1)) world=2 local=0/1 job=vmtest"
  grep -qxF "$want" <<<"$out" || fail "missing: $want"
done

# Nothing left behind: no qemu, no run directory.
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"

[ "$failures" -eq 0 ] && echo "PASS"
exit "$failures"
