#!/usr/bin/env bash
# build_lib.sh -- builds libweft.so with Bazel and copies it next to the Python package
# (python/weft/libweft.so), where `import weft` finds it and `pip install ./python` picks it up.
# BAZEL may carry startup options, e.g. BAZEL="bazel --output_base=/tmp/ob"; arguments go to
# `bazel build` (e.g. --config=debug).
set -euo pipefail
cd "$(dirname "$0")/.."
bazel=(${BAZEL:-bazel})
"${bazel[@]}" build "$@" //:libweft.so
bin=$("${bazel[@]}" info "$@" bazel-bin)
install -m 0755 "$bin/libweft.so" python/weft/libweft.so
echo "python/weft/libweft.so <- $bin/libweft.so"
