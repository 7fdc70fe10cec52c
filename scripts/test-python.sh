#!/usr/bin/env bash
# test-python.sh -- tests the Python package and the torch.distributed backend on two torch
# generations: pip-installs ./python (whose build runs `bazel build //:libweft.so` and packages
# the library) and runs pytest on python/tests twice, against the installed package each time:
#   1. Debian's torch 1.13: a venv that sees Debian's torch and numpy (--system-site-packages;
#      .venv-python/, git-ignored);
#   2. torch $TORCH2_VERSION (default 2.13.0) from pip: a venv of its own (.venv-torch2/,
#      git-ignored), made on the first run. The CPU wheel from download.pytorch.org is tried first
#      (about 200 MB); where that index is unreachable, PyPI's default wheel (CUDA-capable, several
#      GB, runs on the CPU just the same).
# test_wheel.py also builds a wheel and runs it in a clean venv. Arguments go to both pytest runs
# (e.g. -k ddp). TORCH2=0 skips the second run (no network).
#
# BAZEL may carry startup options (BAZEL="bazel --output_base=/tmp/ob"), BAZEL_FLAGS build
# options (BAZEL_FLAGS=--symlink_prefix=/), both read by python/setup.py; PYTHON picks the
# interpreter (default /usr/bin/python3: Debian's, which has python3-torch; `python3` on PATH may
# be another one). Exits non-zero if either run fails; each run ends with pytest's own summary
# line, which scripts/test.sh adds up.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-/usr/bin/python3}
torch2_version=${TORCH2_VERSION:-2.13.0}
# A library packaged beforehand would hide what pip builds.
unset WEFT_LIBWEFT

status=0
run_pytest() {  # venv label args...
  local venv=$1 label=$2
  shift 2
  echo "== pytest on $label"
  # From the repository root, so `import weft` finds the installed package, not python/weft.
  "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests "$@" || status=1
}

# 1. torch 1.13 from Debian.
venv=.venv-python
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv"
fi
# No network: the build backend (setuptools) comes from the system, the package has no
# dependencies to fetch. setup.py builds libweft.so with Bazel and puts it in the package.
"$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index ./python
run_pytest "$venv" "torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')" "$@"

# 2. torch 2.x from pip.
if [ "${TORCH2:-1}" != 0 ]; then
  venv=.venv-torch2
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch2_version')" \
      2>/dev/null; then
    "${pip[@]}" --retries 1 --timeout 20 --index-url https://download.pytorch.org/whl/cpu \
      "torch==$torch2_version" 2>/dev/null ||
      "${pip[@]}" "torch==$torch2_version"
  fi
  "${pip[@]}" numpy pytest setuptools wheel
  "${pip[@]}" --no-build-isolation --no-deps --no-index ./python
  run_pytest "$venv" "torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')" "$@"
fi
exit $status
