#!/usr/bin/env bash
# test-python.sh -- tests the Python package and the torch.distributed backend: builds
# //:libweft.so, copies it next to the package, pip-installs ./python into a venv that sees
# Debian's torch and numpy (--system-site-packages; .venv-python/, git-ignored) and runs pytest
# on python/tests against the installed package. Arguments go to pytest (e.g. -k ddp).
#
# BAZEL may carry startup options (BAZEL="bazel --output_base=/tmp/ob"), BAZEL_FLAGS build
# options (BAZEL_FLAGS=--symlink_prefix=/); PYTHON picks the
# interpreter (default /usr/bin/python3: Debian's, which has python3-torch; `python3` on PATH may
# be another one).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-/usr/bin/python3}
venv=.venv-python
bazel=(${BAZEL:-bazel})

flags=(${BAZEL_FLAGS:-})
"${bazel[@]}" build "${flags[@]}" //:libweft.so
install -m 0755 "$("${bazel[@]}" info "${flags[@]}" bazel-bin)/libweft.so" python/weft/libweft.so

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv"
fi
# No network: the build backend (setuptools) comes from the system, the package has no
# dependencies to fetch.
"$venv/bin/python" -m pip install -q --no-build-isolation --no-deps --no-index ./python

# From the repository root, so `import weft` finds the installed package, not python/weft.
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests "$@"
