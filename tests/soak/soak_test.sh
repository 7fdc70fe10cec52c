#!/bin/bash
# soak_test.sh -- weft-soak with fixed seeds: 60 s at 4 ranks over shm, 60 s at 3 ranks over TCP,
# 200 rounds of communicator churn at 3 ranks, and the seeds that once found a bug, replayed to
# the call that failed. Each line says what it ran, so a failure names the seed to rerun.
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

step "shm, 4 ranks" 4 180 --seed 100 --seconds 60 --transport shm
step "tcp, 3 ranks" 3 180 --seed 200 --seconds 60 --transport tcp
step "churn, 3 ranks" 3 240 --churn 200

[ "$failed" -eq 0 ] && echo PASS
exit "$failed"
