#!/usr/bin/env bash
# install_test.sh -- scripts/install.sh into a temporary prefix, then a small C program built
# against that prefix three ways (cc with pkg-config, CMake's find_package(weft), plain
# -I/-L/-lweft) and run on 2 ranks by the installed weft-run. Also: DESTDIR stages the tree
# without recording itself in the files, the SONAME links, and the installed tools' --help.
#
# Usage: install_test.sh RUNFILES_ROOT (holding scripts/install.sh, include/weft.h,
# libweft.so and the tools as bazel-bin lays them out).
set -euo pipefail

src=$(cd "$1" && pwd)
here=$src/tests/install
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/install_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*"
  exit 1
}
# A sanitizer build (--config=asan, tsan) links its runtime into libweft.so, and a program built
# without the sanitizer cannot load that library (the runtime must come first): nothing to test.
if readelf -d "$src/libweft.so" | grep -qE 'NEEDED.*lib(a|t|ub)san'; then
  echo "SKIP: libweft.so is a sanitizer build; installing it is checked in the default build"
  exit 0
fi
for tool in cc pkg-config cmake; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not found: scripts/install-deps.sh installs it"
done
version() {
  sed -nE "s/^#define WEFT_VERSION_$1 ([0-9]+).*/\1/p" "$src/include/weft.h"
}
major=$(version MAJOR)
ver=$major.$(version MINOR).$(version PATCH)

echo "== DESTDIR staging"
DESTDIR=$tmp/stage "$src/scripts/install.sh" --prefix /opt/weft --prebuilt "$src"
staged=$tmp/stage/opt/weft
for f in include/weft.h lib/libweft.so.$ver lib/pkgconfig/weft.pc \
  lib/cmake/weft/weftConfig.cmake lib/cmake/weft/weftConfigVersion.cmake bin/weft-run \
  lib/weft/libnccl.so.2 lib/weft/libweft_nccl_audit.so \
  bin/weft-bench bin/weft-sim share/man/man1/weft-run.1; do
  [ -f "$staged/$f" ] || fail "DESTDIR install lacks $f"
done
grep -q "^prefix=/opt/weft$" "$staged/lib/pkgconfig/weft.pc" || fail "weft.pc does not record /opt/weft"
if grep -rq "$tmp/stage" "$staged/lib"; then fail "DESTDIR leaked into installed files"; fi

echo "== install into $tmp/prefix"
prefix=$tmp/prefix
"$src/scripts/install.sh" --prefix "$prefix" --prebuilt "$src"
[ "$(readlink "$prefix/lib/libweft.so")" = "libweft.so.$major" ] || fail "libweft.so -> libweft.so.$major"
[ "$(readlink "$prefix/lib/libweft.so.$major")" = "libweft.so.$ver" ] ||
  fail "libweft.so.$major -> libweft.so.$ver"
for t in weft-run weft-bench weft-sim weft-info; do
  "$prefix/bin/$t" --help >"$tmp/help.txt" 2>&1 || fail "$prefix/bin/$t --help failed"
  grep -qi "usage" "$tmp/help.txt" || fail "$t --help prints no usage"
  grep -q "^.TH" "$prefix/share/man/man1/$t.1" || fail "no man page for $t"
done

echo "== weft-run --nccl finds the installed NCCL files"
got=$("$prefix/bin/weft-run" --no-prefix --nccl sh -c 'echo "$LD_AUDIT $WEFT_NCCL_LIBRARY"')
[ "$got" = "$prefix/lib/weft/libweft_nccl_audit.so $prefix/lib/weft/libnccl.so.2" ] ||
  fail "weft-run --nccl set '$got', want the files in $prefix/lib/weft"

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion weft)" = "$ver" ] || fail "pkg-config --modversion weft: not $ver"
libdir=$(pkg-config --variable=libdir weft)

echo "== build: cc with pkg-config"
# shellcheck disable=SC2046
cc -o "$tmp/hello-pkgconfig" "$here/hello.c" $(pkg-config --cflags --libs weft) -Wl,-rpath,"$libdir"

echo "== build: CMake find_package(weft)"
cmake -S "$here" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DWEFT_WANT_VERSION="$ver" \
  >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake configure"; }
cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "cmake build"; }
cp "$tmp/cmake/hello" "$tmp/hello-cmake"
# A release of another major version must not satisfy the request.
if cmake -S "$here" -B "$tmp/cmake-next" -DCMAKE_PREFIX_PATH="$prefix" \
  -DWEFT_WANT_VERSION="$((major + 1)).0.0" >"$tmp/cmake-next.log" 2>&1; then
  fail "find_package(weft $((major + 1)).0.0 EXACT) accepted weft $ver"
fi

echo "== build: cc -I -L -lweft"
cc -o "$tmp/hello-plain" "$here/hello.c" -I"$prefix/include" -L"$prefix/lib" -lweft \
  -Wl,-rpath,"$prefix/lib"

for how in pkgconfig cmake plain; do
  echo "== run: hello-$how on 2 ranks"
  # The program must load the installed library through its SONAME link, not another copy.
  loaded=$(env -u LD_LIBRARY_PATH ldd "$tmp/hello-$how" | awk '/libweft/ {print $1, $3}')
  [ "$loaded" = "libweft.so.$major $prefix/lib/libweft.so.$major" ] ||
    fail "hello-$how loads '$loaded', want libweft.so.$major from $prefix/lib"
  env -u LD_LIBRARY_PATH "$prefix/bin/weft-run" -n 2 --timeout 60 "$tmp/hello-$how" \
    >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; fail "hello-$how on 2 ranks"; }
  cat "$tmp/run.log"
  [ "$(grep -c "all_reduce correct" "$tmp/run.log")" -eq 2 ] || fail "hello-$how: not 2 ranks correct"
done
echo "PASS"
