#!/usr/bin/env bash
# run.sh -- bench.py at 2 and 4 ranks on this host, into table.md. PYTHON: an interpreter with
# torch 2.x and the weft package installed (default: scripts/test-python.sh's .venv-torch2).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../../.venv-torch2/bin/python}
out=${OUT:-$here/table.md}
: > "$out"
for n in 2 4; do
  OMP_NUM_THREADS=1 "$python" -m torch.distributed.run --nproc-per-node "$n" \
    --master-port "$((29700 + n))" "$here/bench.py" --out "$out" "$@"
done
