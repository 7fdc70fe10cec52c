#!/usr/bin/env bash
# test.sh -- runs weft's whole test suite: everything optimized, the unit and small multi-process
# tests again under ASan+UBSan and TSan, and the CPU-only build (the CUDA switch turned off).
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1

passed=0
failed=0
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
run //...
# Sanitizers on the tests that exercise memory and threads without the largest data sets.
sanitized=(//tests/common:all //tests/collectives:all //tests/kernels:all //tests/bootstrap:all
  //tests/errors:all //tests/harness:all //tests/comm:all //tests/trace:all //tests/bench:all
  //tests/transport:all //tests/device:all //tests/nccl:api_test //tests/nccl:device_test)
run --config=asan "${sanitized[@]}"
# The multi-process collectives, host and device buffers, under ASan+UBSan, without the 1 Mi and
# 64 Mi element cases.
run --config=asan //tests/collectives_mp:all //tests/device_mp:device_mp_test \
  --test_arg=--gtest_filter=-*Large*:*Huge*
run --config=tsan //tests/bootstrap:all //tests/errors:all //tests/comm:all //tests/device:all \
  //tests/nccl:api_test //tests/nccl:device_test //tests/kernels:devloop_test \
  //tests/kernels:devloop_plain_test //tests/collectives:devrun_test
# Device calls: the progress thread, stream gates and the engine's worker threads together.
run --config=tsan //tests/device_mp:device_mp_test \
  --test_arg=--gtest_filter=DeviceStream.*:DeviceErrors.*:DeviceFused.*:DeviceResident.*:*Matrix*/1
# The CPU-only build, even where the CUDA toolkit is installed (tests/abi, tests/nccl: the exports
# without the static CUDA runtime linked in).
run --config=nocuda //tests/build:all //tests/errors:all //tests/abi:all //tests/nccl:exports_test

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
run_python

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
run_fuzz

echo "weft tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
