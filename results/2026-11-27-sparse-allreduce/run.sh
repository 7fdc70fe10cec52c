#!/usr/bin/env bash
# run.sh -- bench.py at 2, 3 and 4 ranks, even and skewed non-zeros, REPEATS times, on torch from
# PYTHON (default /work/main/.venv-torch2/bin/python: torch 2.13) with this checkout's package and
# library (bazel build //:libweft.so first). Rows go to stdout, each with the load average before.
set -euo pipefail
cd "$(dirname "$0")/../.."
python=${PYTHON:-/work/main/.venv-torch2/bin/python}
for rep in $(seq "${REPEATS:-3}"); do
  for p in 2 3 4; do
    for skew in "" --skew; do
      echo "# rep $rep, load $(cut -d' ' -f1 /proc/loadavg)"
      PYTHONPATH=$PWD/python WEFT_LIBRARY=$PWD/.bazel/bin/libweft.so OMP_NUM_THREADS=1 \
        "$python" -W ignore -m torch.distributed.run --nproc-per-node "$p" \
        results/2026-11-27-sparse-allreduce/bench.py $skew 2>&1 | grep '^[|]'
    done
  done
done
