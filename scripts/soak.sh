#!/usr/bin/env bash
# soak.sh -- runs weft-soak for hours: transports shm, tcp and auto in turn at 3, 4 and 5 ranks,
# SEGMENT seconds each with a fresh seed, and a churn of communicators after every round of
# transports. Prints every seed; on a failure prints the command that reproduces it, keeps going
# and exits 1 at the end.
#   scripts/soak.sh [--hours H] [--segment S] [--max-count M]   (defaults: 1 hour, 300 s, 1Mi)
set -uo pipefail
cd "$(dirname "$0")/.."
hours=1
segment=300
max_count=1048576
while [ $# -gt 0 ]; do
  case "$1" in
    --hours) hours=$2; shift 2 ;;
    --segment) segment=$2; shift 2 ;;
    --max-count) max_count=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak.sh: unknown argument '$1' (--hours H, --segment S, --max-count M)" >&2; exit 2 ;;
  esac
done
scripts/install-deps.sh || exit 1
bazel build -c opt //tools:weft-run //tools/soak:weft-soak || exit 1
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
run="$bin/tools/weft-run"
soak="$bin/tools/soak/weft-soak"

end=$((SECONDS + $(awk -v h="$hours" 'BEGIN { printf "%d", h * 3600 }')))
failures=()
segments=0
# A segment that hangs is stopped by weft-run well after its time is up; that counts as a failure.
job() {
  local n=$1
  shift
  segments=$((segments + 1))
  echo "== $(date -u +%H:%M:%S) weft-run -n $n weft-soak $*"
  if ! "$run" -n "$n" --timeout $((segment * 2 + 120)) "$soak" "$@"; then
    failures+=("weft-run -n $n weft-soak $*")
  fi
}
round=0
while [ $SECONDS -lt $end ]; do
  for transport in shm tcp auto; do
    [ $SECONDS -lt $end ] || break
    n=$((3 + (round % 3)))
    seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
    left=$((end - SECONDS))
    secs=$((left < segment ? left : segment))
    [ "$secs" -ge 5 ] || secs=5
    job "$n" --seed "$seed" --seconds "$secs" --transport "$transport" --max-count "$max_count"
  done
  [ $SECONDS -lt $end ] && job 3 --churn 200
  round=$((round + 1))
done
echo "soak.sh: $segments runs, ${#failures[@]} failed"
for f in "${failures[@]}"; do echo "  FAILED: $f"; done
[ ${#failures[@]} -eq 0 ]
