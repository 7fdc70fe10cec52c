#!/usr/bin/env bash
# verbs_test.sh -- the RDMA verbs tier: one boot of scripts/rdma-vm.sh, two VMs with two ranks
# each, runs vm_checks.sh on every rank; this script then wants every check's "ok" line from
# every rank that takes part, names each check that failed or never reported, and finds nothing
# left behind. Passes with SKIP where qemu cannot run.
#
#   verbs_test.sh MAIN_SH VM_CHECKS_SH VM_RANK [IBVERBS_TEST [WEFT_INFO]]
set -uo pipefail

usage="usage: verbs_test.sh MAIN_SH VM_CHECKS_SH VM_RANK [IBVERBS_TEST [WEFT_INFO]]"
script=$(realpath "${1:?$usage}")  # absolute: the test changes directory below
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
# The guests see this machine's root at the same paths, except /tmp (theirs is their own), where
# the checkout may be: the programs run from copies beside the run directory (Bazel's test
# directory lies in its output base, outside /tmp).
private='^/(tmp|run|var/tmp|dev/shm)(/|$)'
stage_base=$base
if [[ $stage_base =~ $private ]]; then
  stage_base=${HOME:-/root}/.cache/weft-rdma-test
  [[ $stage_base =~ $private ]] && stage_base=/var/cache/weft-rdma-test
  mkdir -p "$stage_base" || exit 1
fi
stage=$(mktemp -d "$stage_base/weft-rdma-bin.XXXXXX") || exit 1
trap 'rm -rf "$own" "$stage"' EXIT
cp -L "${2:?$usage}" "$stage/vm_checks.sh" && cp -L "${3:?$usage}" "$stage/vm_rank" || exit 1
checks=$stage/vm_checks.sh
rank_bin=$stage/vm_rank
ib_test=""
if [ -n "${4:-}" ]; then
  cp -L "$4" "$stage/ibverbs_test" || exit 1
  ib_test=$stage/ibverbs_test
fi
info_bin=""
if [ -n "${5:-}" ]; then
  cp -L "$5" "$stage/weft-info" || exit 1
  info_bin=$stage/weft-info
fi
leftovers() {
  ls -A "$own"
  pgrep -f "qemu-system.*weft_run=$own/" 2>/dev/null
}

# Every check and the launcher ranks that report it (vm_checks.sh says which run it).
expected=(
  "matrix4 0 1 2 3"
  "matrix3 0 1 2"
  "matrix2 0 2"
  "hier 0 1 2 3"
  "gdr 0 1 2 3"
  "staged 0 2"
  "ib-gid 0 1 2 3"
  "ib-hca 0 1 2 3"
  "auto-gid 0 1 2 3"
  "auto-hca 0 1 2 3"
  "kill 0 1 2 3"
  "vanish 0 2"
)
[ -n "$ib_test" ] && expected=("transport 0" "${expected[@]}")
[ -n "$info_bin" ] && expected=("info 0 2" "${expected[@]}")

t0=$EPOCHREALTIME
# 10 minutes at most, boot included; about 3 on two idle cores.
cd "$stage" || exit 1  # the ranks' working directory, which must be visible inside too
out=$(TMPDIR=$own WEFT_JOB_ID=verbs-test "$script" --hosts 2 --ranks-per-host 2 --timeout 600 -- \
  bash "$checks" "$rank_bin" $ib_test $info_bin 2>&1)
rc=$?
took=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
echo "$out"
echo "verbs_test: rdma-vm.sh exited with status $rc after $took s"
if grep -q "^SKIP:" <<<"$out"; then
  [ "$rc" -eq 0 ] || fail "SKIP with exit status $rc"
  exit "$failures"
fi
# vm_checks.sh always exits 0: anything else is a VM that did not boot, or --timeout.
[ "$rc" -eq 0 ] || fail "rdma-vm.sh: exit status $rc (a VM did not boot, or the run timed out)"

for e in "${expected[@]}"; do
  read -r name ranks <<<"$e"
  for r in $ranks; do
    line=$(grep -E "^\[rank $r\] (ok|FAIL) $name[: ]" <<<"$out" | head -1)
    case "$line" in
      "[rank $r] ok "*) ;;
      "") fail "check $name, rank $r: never reported (see the output above)" ;;
      *) fail "check $name, rank $r:${line#*FAIL $name:}" ;;
    esac
  done
done

left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"

[ "$failures" -eq 0 ] && echo "PASS"
exit "$failures"
