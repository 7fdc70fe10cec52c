#!/usr/bin/env bash
# install.sh -- installs weft for C and C++ builds: the header, the shared library with its
# SONAME links, a pkg-config file, a CMake package (target weft::weft), and the tools with man
# pages made from their --help.
#
#   scripts/install.sh --prefix DIR [--libdir DIR] [--prebuilt DIR] [-- BAZEL_BUILD_FLAGS...]
#
# Under PREFIX it writes:
#   include/weft.h
#   LIBDIR/libweft.so.X.Y.Z, LIBDIR/libweft.so.X -> libweft.so.X.Y.Z, LIBDIR/libweft.so -> libweft.so.X
#   LIBDIR/pkgconfig/weft.pc
#   LIBDIR/cmake/weft/weftConfig.cmake, weftConfigVersion.cmake
#   bin/weft-run, bin/weft-bench, bin/weft-sim, bin/weft-info, share/man/man1/weft-*.1
#   LIBDIR/weft/libnccl.so.2 (weft behind the NCCL API) and LIBDIR/weft/libweft_nccl_audit.so (the
#     LD_AUDIT module that loads the libnccl.so.2 beside it in place of NVIDIA's): a folder of
#     their own, outside the loader's search path, so that no program picks up weft's
#     libnccl.so.2 unless told to (LD_AUDIT, LD_PRELOAD or weft-run --nccl, which looks in
#     PREFIX/lib/weft and PREFIX/lib64/weft; with another LIBDIR give it --nccl-library)
# LIBDIR is lib unless --libdir says otherwise (relative to PREFIX, e.g. lib/x86_64-linux-gnu).
# DESTDIR, as in `make install`, is prepended to every path written, but not to the paths the
# files record, so a package can be staged and later unpacked at PREFIX.
#
# By default it builds what it installs with Bazel (the same targets as `bazel build //...`,
# optimized); flags after `--` go to `bazel build` (e.g. --config=nocuda), and BAZEL may carry
# startup options (BAZEL="bazel --output_base=/tmp/ob"). --prebuilt DIR takes them instead from
# DIR, laid out as bazel-bin (DIR/libweft.so, DIR/tools/weft-run, DIR/tools/bench/weft-bench,
# DIR/tools/sim/weft-sim, DIR/tools/info/weft-info, DIR/nccl/*.so*): for packaging
# steps that build separately, and for the install test, which runs inside Bazel and cannot call it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}
die() {
  echo "install.sh: $*" >&2
  exit 1
}

prefix=/usr/local
libdir=lib
prebuilt=""
bazel_flags=()
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --libdir) [ $# -ge 2 ] || die "--libdir needs a directory"; libdir=$2; shift 2 ;;
    --libdir=*) libdir=${1#*=}; shift ;;
    --prebuilt) [ $# -ge 2 ] || die "--prebuilt needs a directory"; prebuilt=$2; shift 2 ;;
    --prebuilt=*) prebuilt=${1#*=}; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; bazel_flags=("$@"); break ;;
    *) die "unknown argument '$1' (--help lists them)" ;;
  esac
done

case $prefix in
  /*) ;;
  *) die "--prefix must be an absolute path (the installed files record it), got '$prefix'" ;;
esac
prefix=${prefix%/}
[ -n "$prefix" ] || prefix=/
# libdir relative to the prefix: the CMake package finds the prefix from its own location.
libdir=${libdir#"$prefix"/}
libdir=${libdir%/}
case $libdir in
  /* | "" | *..*) die "--libdir must be a directory under the prefix, got '$libdir'" ;;
esac

header=$root/include/weft.h
version_part() {
  sed -nE "s/^#define WEFT_VERSION_$1 ([0-9]+).*/\1/p" "$header"
}
major=$(version_part MAJOR)
minor=$(version_part MINOR)
patch=$(version_part PATCH)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] ||
  die "cannot read WEFT_VERSION_MAJOR/MINOR/PATCH from $header"
version=$major.$minor.$patch

if [ -z "$prebuilt" ]; then
  bazel=(${BAZEL:-bazel})
  command -v "${bazel[0]}" >/dev/null 2>&1 ||
    die "${bazel[0]} not found: run scripts/install-deps.sh, or pass --prebuilt DIR"
  (cd "$root" && "${bazel[@]}" build "${bazel_flags[@]}" //:libweft.so //tools:weft-run \
    //tools/bench:weft-bench //tools/sim:weft-sim //tools/info:weft-info //nccl:libnccl.so.2 \
    //nccl:libweft_nccl_audit.so)
  prebuilt=$(cd "$root" && "${bazel[@]}" info "${bazel_flags[@]}" bazel-bin)
fi
tools=(tools/weft-run tools/bench/weft-bench tools/sim/weft-sim tools/info/weft-info)
nccl_files=(nccl/libnccl.so.2 nccl/libweft_nccl_audit.so)
for f in libweft.so "${tools[@]}" "${nccl_files[@]}"; do
  [ -f "$prebuilt/$f" ] || die "$prebuilt/$f is missing (build it with bazel build //... first)"
done

dest=${DESTDIR:-}$prefix
dest=${dest%/}
lib=$dest/$libdir
real=libweft.so.$version
install -d "$dest/include" "$lib/pkgconfig" "$lib/cmake/weft" "$lib/weft" "$dest/bin" \
  "$dest/share/man/man1"
install -m 0644 "$header" "$dest/include/weft.h"
install -m 0644 "$prebuilt/libweft.so" "$lib/$real"
ln -sfn "$real" "$lib/libweft.so.$major"
ln -sfn "libweft.so.$major" "$lib/libweft.so"
# The audit module loads the libnccl.so.2 in its own folder: the two stay together.
for f in "${nccl_files[@]}"; do
  install -m 0755 "$prebuilt/$f" "$lib/weft/$(basename "$f")"
done

# pkg-config: absolute paths under the final prefix, as distributions install them.
cat >"$lib/pkgconfig/weft.pc" <<EOF
prefix=$prefix
exec_prefix=\${prefix}
libdir=\${prefix}/$libdir
includedir=\${prefix}/include

Name: weft
Description: Collective communication (all-reduce, broadcast, ...) across processes and hosts
Version: $version
Libs: -L\${libdir} -lweft
Cflags: -I\${includedir}
EOF

# CMake: the prefix is found from this file's own location, so a staged or moved tree works.
up=$(echo "$libdir/cmake/weft" | sed -E 's|[^/]+|..|g')
cat >"$lib/cmake/weft/weftConfig.cmake" <<EOF
# weftConfig.cmake -- find_package(weft) defines the imported target weft::weft (include/weft.h
# and libweft.so). Written by weft's scripts/install.sh.
get_filename_component(_weft_prefix "\${CMAKE_CURRENT_LIST_DIR}/$up" ABSOLUTE)
if(NOT TARGET weft::weft)
  add_library(weft::weft SHARED IMPORTED)
  set_target_properties(weft::weft PROPERTIES
    IMPORTED_LOCATION "\${_weft_prefix}/$libdir/$real"
    IMPORTED_SONAME "libweft.so.$major"
    INTERFACE_INCLUDE_DIRECTORIES "\${_weft_prefix}/include")
endif()
if(NOT EXISTS "\${_weft_prefix}/$libdir/$real" OR NOT EXISTS "\${_weft_prefix}/include/weft.h")
  set(weft_FOUND FALSE)
  set(weft_NOT_FOUND_MESSAGE
    "weft's files are missing under \${_weft_prefix}: reinstall it with scripts/install.sh")
endif()
unset(_weft_prefix)
EOF

# Compatible within a major version, which is what the SONAME promises; a 64-bit library only.
cat >"$lib/cmake/weft/weftConfigVersion.cmake" <<EOF
# weftConfigVersion.cmake -- weft $version satisfies find_package(weft X.Y) for X = $major and
# X.Y <= $version. Written by weft's scripts/install.sh.
set(PACKAGE_VERSION "$version")
if(NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  set(PACKAGE_VERSION "\${PACKAGE_VERSION} (64-bit)")
elseif(NOT DEFINED PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
elseif(PACKAGE_FIND_VERSION_MAJOR STREQUAL "$major"
       AND NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
EOF

# Tools, and a man page each that holds its --help (the one place their options are written).
for t in "${tools[@]}"; do
  name=$(basename "$t")
  install -m 0755 "$prebuilt/$t" "$dest/bin/$name"
  help=$("$prebuilt/$t" --help 2>&1) || die "$prebuilt/$t --help failed: $help"
  upper=$(echo "$name" | tr '[:lower:]' '[:upper:]')
  {
    echo ".TH $upper 1 \"\" \"weft $version\" \"weft\""
    echo ".SH NAME"
    echo "$name \\- $(case $name in
      weft-run) echo "start the ranks of a weft or torch.distributed job on this host" ;;
      weft-bench) echo "benchmark weft's collectives with nccl-tests' flags and columns" ;;
      weft-sim) echo "run weft's schedules on an alpha-beta-gamma cost model" ;;
      weft-info) echo "show what weft finds here: build, transports, knobs, algorithms" ;;
    esac)"
    echo ".SH DESCRIPTION"
    echo ".nf"
    # roff: a backslash is \e; a line that starts with . or ' would be a request.
    printf '%s\n' "$help" | sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
    echo ".fi"
  } >"$dest/share/man/man1/$name.1"
  chmod 0644 "$dest/share/man/man1/$name.1"
done

echo "installed weft $version under ${DESTDIR:+$DESTDIR}$prefix"
