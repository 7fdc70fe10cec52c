#!/bin/bash
# soak_test.sh -- weft-soak with fixed seeds: 60 s at 4 ranks over shm, 60 s at 3 ranks over TCP,
# 30 s at 5 ranks over shm with the smallest slices, and 200 rounds of communicator churn at 3
# ranks. A seed that finds a bug joins them, replayed with --calls up to the call that failed.
# Each step prints its command line, so a failure names what to rerun.
set -u
run="$1"
soak="$2"
failed=0

# step LABEL RANKS TIMEOUT_S ARGS...: one weft-run job; weft-run stops it after TIMEOUT_S.
step() {
  local label=$1 n=$2 limit=$3
  shift 3
  echo "== $label: weft-run -n $n weft-soak $*"
  local start=$SECONDS
  if "$run" -n "$n" --timeout "$limit" "$soak" "$@"; then
    echo "== $label: passed in $((SECONDS - start)) s"
  else
    echo "== $label: FAILED (status $?) after $((SECONDS - start)) s: rerun weft-run -n $n weft-soak $*"
    failed=1
  fi
}

# The command line, before any rank starts: bad values exit 2 and name the option.
for bad in "--seconds x" "--calls 0" "--transport ib" "--seconds 3 --calls 3" "--max-count -1"; do
  # shellcheck disable=SC2086
  out=$("$soak" $bad 2>&1)
  status=$?
  opt=${bad%% *}
  if [ "$status" -ne 2 ] || ! grep -q -- "${opt#--}" <<<"$out"; then
    echo "== weft-soak $bad: want status 2 and a message naming $opt, got $status: $out"
    failed=1
  fi
done

step "shm, 4 ranks" 4 180 --seed 100 --seconds 60 --transport shm
step "tcp, 3 ranks" 3 180 --seed 200 --seconds 60 --transport tcp
# The smallest slices and rings weft allows: every call of more than a few KiB is pipelined over
# many slices, with senders waiting on full rings all the time.
WEFT_SLICE_BYTES=4096 WEFT_SHM_SLOTS=2 step "shm, 5 ranks, 4 KiB slices in 2 slots" 5 120 \
  --seed 400 --seconds 30 --transport shm --max-count 300000
step "churn, 3 ranks" 3 240 --churn 200

[ "$failed" -eq 0 ] && echo PASS
exit "$failed"
