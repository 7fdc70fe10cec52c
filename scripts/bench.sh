#!/usr/bin/env bash
# bench.sh -- builds weft and runs a 4-rank all-reduce benchmark over loopback.
# Extra arguments go to weft-bench (nccl-tests' flags), e.g. scripts/bench.sh -d half -o max.
# NPROC=2 scripts/bench.sh runs 2 ranks instead of 4.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
bazel build -c opt //tools:weft-run //tools/bench:weft-bench
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
if [ $# -eq 0 ]; then
  set -- -b 4K -e 256M -f 2 -n 20 -w 5 -c 1
fi
exec "$bin/tools/weft-run" -n "${NPROC:-4}" --no-prefix -- "$bin/tools/bench/weft-bench" "$@"
