#!/usr/bin/env bash
# test.sh -- runs weft's whole test suite: everything optimized, the unit and small multi-process
# tests again under ASan+UBSan and TSan, and the CPU-only build (the CUDA switch turned off).
#
# Stages, in order (each prints its time at the end, beside its tally): build (everything
# optimized, all tests), asan, asan-mp, tsan, tsan-device, nocuda, python, fuzz. STAGES="asan tsan"
# runs only those (by hand, to rerun what failed); CI runs them all. docs/testing.md lists each
# stage's time on a fresh clone and the runs that are left to a person (soaks, long fuzzing).
set -uo pipefail
cd "$(dirname "$0")/.."
all_stages="build asan asan-mp tsan tsan-device nocuda python fuzz"
for s in ${STAGES:-}; do
  if [[ " $all_stages " != *" $s "* ]]; then
    echo "scripts/test.sh: STAGES names '$s', which is not a stage (stages: $all_stages)" >&2
    exit 2
  fi
done
start_all=$(date +%s)
scripts/install-deps.sh || exit 1
deps_seconds=$(($(date +%s) - start_all))

passed=0
failed=0
stage_report=""
# Whether stage $1 is to run (STAGES unset: every stage).
wanted() { [ -z "${STAGES:-}" ] || [[ " $STAGES " == *" $1 "* ]]; }
# Runs `stage NAME FUNCTION ARGS...`: FUNCTION ARGS adds to passed/failed; the stage's time and
# tally go into the report printed at the end.
stage() {
  local name=$1
  shift
  wanted "$name" || return 0
  local t0 p0=$passed f0=$failed
  t0=$(date +%s)
  "$@"
  stage_report+=$(printf '%-12s %6ss %6s passed %4s failed' "$name" $(($(date +%s) - t0)) \
    $((passed - p0)) $((failed - f0)))$'\n'
}
# Runs one bazel test invocation and adds its tally from bazel's summary line.
run() {
  local log
  log=$(mktemp)
  echo "== bazel test $*"
  bazel test "$@" 2>&1 | tee "$log" | grep -E "PASSED|FAILED|TIMEOUT|NO STATUS|Executed|ERROR"
  local status=${PIPESTATUS[0]}
  local p f
  p=$(grep -cE "^//.* PASSED" "$log")
  f=$(grep -cE "^//.* (FAILED|TIMEOUT|NO STATUS)" "$log")
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # a build error fails the run too
  passed=$((passed + p))
  failed=$((failed + f))
  rm -f "$log"
}

# Everything, optimized (the default config). That includes the emulated multi-host tests
# (//tests/netns/..., tag "netns": hosts in network namespaces via scripts/netns-hosts.sh), which
# need root and iproute2 and print SKIP and pass without them.
stage build run //...
# Sanitizers on the tests that exercise memory and threads without the largest data sets.
sanitized=(//tests/common:all //tests/collectives:all //tests/kernels:all //tests/bootstrap:all
  //tests/errors:all //tests/harness:all //tests/comm:all //tests/trace:all //tests/bench:all
  //tests/transport:all //tests/device:all //tests/nccl:api_test //tests/nccl:device_test)
stage asan run --config=asan "${sanitized[@]}"
# The multi-process collectives, host and device buffers, under ASan+UBSan, without the 1 Mi and
# 64 Mi element cases.
stage asan-mp run --config=asan //tests/collectives_mp:all //tests/device_mp:device_mp_test \
  --test_arg=--gtest_filter=-*Large*:*Huge*
stage tsan run --config=tsan //tests/bootstrap:all //tests/errors:all //tests/comm:all //tests/device:all \
  //tests/nccl:api_test //tests/nccl:device_test //tests/kernels:devloop_test \
  //tests/kernels:devloop_plain_test //tests/collectives:devrun_test
# Device calls: the progress thread, stream gates and the engine's worker threads together.
stage tsan-device run --config=tsan //tests/device_mp:device_mp_test \
  --test_arg=--gtest_filter=DeviceStream.*:DeviceErrors.*:DeviceFused.*:DeviceResident.*:*Matrix*/1
# The CPU-only build, even where the CUDA toolkit is installed (tests/abi, tests/nccl: the exports
# without the static CUDA runtime linked in).
stage nocuda run --config=nocuda //tests/build:all //tests/errors:all //tests/abi:all //tests/nccl:exports_test

# The Python package and the torch.distributed backend, on torch 1.13 and 2.x: each pytest test
# counts as one, in both runs (each ends with pytest's summary line: "3 failed, 40 passed, 2
# skipped in 80.1s").
run_python() {
  local log
  log=$(mktemp)
  echo "== scripts/test-python.sh"
  scripts/test-python.sh 2>&1 | tee "$log" | grep -E "^== pytest|^(FAILED|ERROR)|passed|failed|error"
  local status=${PIPESTATUS[0]}
  local summaries p f
  summaries=$(grep -E "^=* ?[0-9]+ (passed|failed|errors?|skipped|deselected).* in [0-9.]+s" "$log" || true)
  p=$(echo "$summaries" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+" | awk '{s += $1} END {print s + 0}')
  f=$(echo "$summaries" | grep -oE "[0-9]+ (failed|errors?)" | grep -oE "[0-9]+" |
    awk '{s += $1} END {print s + 0}')
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # a build or install error fails it too
  passed=$((passed + p))
  failed=$((failed + f))
  rm -f "$log"
}
stage python run_python

# Every parser of outside bytes fuzzed 15 s under ASan+UBSan, after replaying its committed
# regression inputs and seeds (scripts/fuzz.sh): each target counts as one.
run_fuzz() {
  local log
  log=$(mktemp)
  echo "== scripts/fuzz.sh --seconds 15"
  scripts/fuzz.sh --seconds 15 2>&1 | tee "$log" | grep -vE "^== "
  local status=${PIPESTATUS[0]}
  local p f
  p=$(sed -n '/^target  *seconds/,$p' "$log" | grep -cE "  ok \(crashes: 0\)$")
  f=$(sed -n '/^target  *seconds/,$p' "$log" | grep -vE "^target|  ok \(crashes: 0\)$" | grep -c .)
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # clang missing, or the script failed
  passed=$((passed + p))
  failed=$((failed + f))
  rm -f "$log"
}
stage fuzz run_fuzz

echo "== stage times (install-deps: ${deps_seconds}s)"
printf '%s' "$stage_report"
echo "total: $(($(date +%s) - start_all))s"
echo "weft tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
