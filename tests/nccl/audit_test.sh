#!/usr/bin/env bash
# audit_test.sh -- LD_AUDIT=libweft_nccl_audit.so puts weft's libnccl.so.2 under a program that
# finds another libnccl.so.2 through its DT_RPATH, as libtorch_cuda.so finds the nvidia-nccl
# wheel's (searched before LD_LIBRARY_PATH, so only the audit module or LD_PRELOAD can redirect it).
#
# Builds a decoy libnccl.so.2 whose ncclGetVersion answers 99999 and a program linked with -lnccl
# and a DT_RPATH to the decoy's folder. Checks: without LD_AUDIT the program gets the decoy (so the
# test can fail); with LD_AUDIT it gets weft's (2.30.7 = 23007, weft's file in /proc/self/maps,
# the decoy not mapped), found beside the module or named by WEFT_NCCL_LIBRARY; a child process
# (sh) of the audited program maps no libnccl; other libraries are left alone; when weft's file is
# missing the program runs on the decoy and stderr says why, once (not with WEFT_NCCL_AUDIT_QUIET).
#
# Usage: audit_test.sh LIBWEFT_NCCL_AUDIT_SO LIBNCCL_SO_2
set -euo pipefail

audit=$(realpath "$1")
weft=$(realpath "$2")
cc=${CC:-cc}
fail=0
if ! command -v "$cc" >/dev/null; then
  echo "SKIP: no C compiler ($cc) to build the decoy and the program"
  exit 0
fi
# A sanitizer build (--config=asan, tsan) links its runtime into both libraries, and a program
# built without the sanitizer cannot load them (the runtime must come first): nothing to test.
if readelf -d "$audit" "$weft" | grep -qE 'NEEDED.*lib(a|t|ub)san'; then
  echo "SKIP: a sanitizer build; the audit module is checked in the default build"
  exit 0
fi
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/audit_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The decoy: NVIDIA's SONAME, another answer.
mkdir -p "$tmp/decoy"
cat >"$tmp/decoy.c" <<'EOF'
int ncclGetVersion(int *v) { *v = 99999; return 0; }
EOF
"$cc" -shared -fPIC -Wl,-soname,libnccl.so.2 -o "$tmp/decoy/libnccl.so.2" "$tmp/decoy.c"
ln -s libnccl.so.2 "$tmp/decoy/libnccl.so"

# The program: prints the version and every libnccl file mapped; "spawn" also runs a shell that
# prints its own mapped libnccl files.
cat >"$tmp/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int ncclGetVersion(int *v);
int main(int argc, char **argv) {
  int v = 0;
  ncclGetVersion(&v);
  printf("version %d\n", v);
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  while (f && fgets(line, sizeof(line), f))
    if (strstr(line, "libnccl")) printf("map %s", strrchr(line, ' ') + 1);
  if (f) fclose(f);
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "spawn") == 0)
    return system("grep libnccl /proc/self/maps | sed 's/.* /child /'") == -1;
  return 0;
}
EOF
# --disable-new-dtags: DT_RPATH, not DT_RUNPATH, as libtorch_cuda.so has.
"$cc" -o "$tmp/prog" "$tmp/prog.c" -L"$tmp/decoy" -lnccl \
  -Wl,--disable-new-dtags,-rpath,"$tmp/decoy"
readelf -d "$tmp/prog" | grep -q '(RPATH)' || {
  echo "FAIL: the program has no DT_RPATH"
  exit 1
}

check() {  # name condition...
  local name=$1
  shift
  if "$@"; then
    echo "ok: $name"
  else
    echo "FAIL: $name"
    fail=1
  fi
}
has() { grep -qxF "$2" "$1"; }
lacks() { ! grep -qF "$2" "$1"; }

run() {  # out err env... -- runs the program with the environment given
  local out=$1 err=$2
  shift 2
  env -u LD_AUDIT -u LD_PRELOAD -u WEFT_NCCL_LIBRARY -u WEFT_NCCL_AUDIT_QUIET "$@" \
    >"$out" 2>"$err" || {
    echo "FAIL: the program failed ($*):"
    cat "$out" "$err"
    fail=1
  }
}

echo "== the module needs libc only (it is loaded into every process that inherits LD_AUDIT)"
needed=$(readelf -d "$audit" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' ')
check "NEEDED: ${needed}" test "$needed" = "libc.so.6 "

echo "== without LD_AUDIT: the decoy"
run "$tmp/plain.out" "$tmp/plain.err" "$tmp/prog"
check "decoy's version" has "$tmp/plain.out" "version 99999"
check "decoy mapped" has "$tmp/plain.out" "map $tmp/decoy/libnccl.so.2"

echo "== LD_AUDIT, weft's libnccl.so.2 beside the module"
mkdir -p "$tmp/lib"
cp "$audit" "$tmp/lib/libweft_nccl_audit.so"
cp "$weft" "$tmp/lib/libnccl.so.2"
run "$tmp/beside.out" "$tmp/beside.err" LD_AUDIT="$tmp/lib/libweft_nccl_audit.so" "$tmp/prog" spawn
check "weft's version" has "$tmp/beside.out" "version 23007"
check "weft's file mapped" has "$tmp/beside.out" "map $tmp/lib/libnccl.so.2"
check "decoy not mapped" lacks "$tmp/beside.out" "$tmp/decoy"
check "child maps no libnccl" lacks "$tmp/beside.out" "child "
check "nothing on stderr" test ! -s "$tmp/beside.err"

echo "== LD_AUDIT with WEFT_NCCL_LIBRARY (the built files where Bazel put them)"
run "$tmp/env.out" "$tmp/env.err" LD_AUDIT="$audit" WEFT_NCCL_LIBRARY="$weft" "$tmp/prog"
check "weft's version" has "$tmp/env.out" "version 23007"
check "weft's file mapped" has "$tmp/env.out" "map $weft"

echo "== LD_AUDIT, dlopen(\"libnccl.so\") and an unrelated library"
cat >"$tmp/dl.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
int main(void) {
  void *h = dlopen("libnccl.so", RTLD_NOW);
  int v = 0;
  if (h) ((int (*)(int *))dlsym(h, "ncclGetVersion"))(&v);
  printf("version %d\n", v);
  printf("libm %s\n", dlopen("libm.so.6", RTLD_NOW) ? "loaded" : dlerror());
  return 0;
}
EOF
"$cc" -o "$tmp/dl" "$tmp/dl.c" -ldl -Wl,--disable-new-dtags,-rpath,"$tmp/decoy"
run "$tmp/dl.out" "$tmp/dl.err" LD_AUDIT="$tmp/lib/libweft_nccl_audit.so" "$tmp/dl"
check "dlopen(libnccl.so) gets weft's" has "$tmp/dl.out" "version 23007"
check "libm.so.6 loads as usual" has "$tmp/dl.out" "libm loaded"

echo "== weft's file missing: the decoy, and one line on stderr"
mkdir -p "$tmp/alone"
cp "$audit" "$tmp/alone/libweft_nccl_audit.so"
run "$tmp/missing.out" "$tmp/missing.err" LD_AUDIT="$tmp/alone/libweft_nccl_audit.so" "$tmp/prog"
check "decoy's version" has "$tmp/missing.out" "version 99999"
check "the warning names the file" grep -qF "$tmp/alone/libnccl.so.2: No such file" "$tmp/missing.err"
check "one line" test "$(wc -l <"$tmp/missing.err")" -eq 1
run "$tmp/missing_env.out" "$tmp/missing_env.err" LD_AUDIT="$audit" \
  WEFT_NCCL_LIBRARY="$tmp/nowhere/libnccl.so.2" "$tmp/prog"
check "decoy's version (WEFT_NCCL_LIBRARY missing)" has "$tmp/missing_env.out" "version 99999"
check "the warning names WEFT_NCCL_LIBRARY" grep -qF "from WEFT_NCCL_LIBRARY" "$tmp/missing_env.err"
run "$tmp/quiet.out" "$tmp/quiet.err" LD_AUDIT="$tmp/alone/libweft_nccl_audit.so" \
  WEFT_NCCL_AUDIT_QUIET=1 "$tmp/prog"
check "decoy's version (quiet)" has "$tmp/quiet.out" "version 99999"
check "WEFT_NCCL_AUDIT_QUIET: nothing on stderr" test ! -s "$tmp/quiet.err"

if [ "$fail" != 0 ]; then
  for f in "$tmp"/*.out "$tmp"/*.err; do
    echo "--- $(basename "$f")"
    cat "$f"
  done
fi
exit "$fail"
