#!/usr/bin/env bash
# test-python.sh -- tests the Python package and the torch.distributed backend: pip-installs
# ./python (whose build runs `bazel build //:libweft.so` and packages the library) into a venv
# that sees Debian's torch and numpy (--system-site-packages; .venv-python/, git-ignored) and runs
# pytest on python/tests against the installed package; test_wheel.py also builds a wheel and
# runs it in a clean venv. Arguments go to pytest (e.g. -k ddp).
#
# BAZEL may carry startup options (BAZEL="bazel --output_base=/tmp/ob"), BAZEL_FLAGS build
# options (BAZEL_FLAGS=--symlink_prefix=/), both read by python/setup.py; PYTHON picks the
# interpreter (default /usr/bin/python3: Debian's, which has python3-torch; `python3` on PATH may
# be another one).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-/usr/bin/python3}
venv=.venv-python
# A library packaged beforehand would hide what pip builds.
unset WEFT_LIBWEFT

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv"
fi
# No network: the build backend (setuptools) comes from the system, the package has no
# dependencies to fetch. setup.py builds libweft.so with Bazel and puts it in the package.
"$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index ./python

# From the repository root, so `import weft` finds the installed package, not python/weft.
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests "$@"
