#!/usr/bin/env bash
# fuzz.sh -- builds weft's fuzz targets (tests/fuzz/*_fuzz.c) with clang's libFuzzer under
# ASan+UBSan, replays every committed regression input, then fuzzes each target for N seconds on a
# copy of its seed corpus and prints executions, coverage and crashes per target.
#
#   scripts/fuzz.sh [--seconds N] [--keep DIR] [TARGET...]
#
# TARGET is a name such as store_wire (default: every tests/fuzz/*_fuzz.c). --seconds 0 only
# builds and replays the regressions and seeds. A crash is minimized into
# tests/fuzz/regressions/<target>/ (commit it with the fix, so every later run replays it) and
# fails the run. The committed corpus is never written to: new inputs stay in the work directory,
# kept with --keep DIR. The seeds are written by tests/fuzz/make_seeds.py.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

seconds=25
keep=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.c; do
    n=$(basename "$f" _fuzz.c)
    targets+=("$n")
  done
fi
command -v clang >/dev/null 2>&1 || {
  echo "fuzz.sh: clang is missing: run scripts/install-deps.sh (Debian's clang has libFuzzer)" >&2
  exit 1
}

# The weft sources each target links, beyond its own file: only what its parser needs, so a
# target builds in seconds and its coverage counts the parser, not the whole library.
sources_of() {
  case "$1" in
    store_wire) echo bootstrap/store_wire.c ;;
    store_server | store_client)
      echo bootstrap/store_wire.c bootstrap/store_server.c bootstrap/store_client.c \
        bootstrap/store_kv.c common/net.c common/error.c common/hmac.c ;;
    env_url) echo bootstrap/env.c common/net.c common/error.c ;;
    boot_record)
      echo bootstrap/rendezvous.c bootstrap/env.c bootstrap/store_wire.c bootstrap/store_server.c \
        bootstrap/store_client.c bootstrap/store_kv.c common/net.c common/error.c common/hmac.c ;;
    tcp_wire) echo transport/tcp_wire.c ;;
    call_desc) echo collectives/call_desc.c collectives/names.c common/error.c ;;
    tune_file) echo comm/tune_file.c common/error.c ;;
    msccl)
      echo collectives/msccl_import.c collectives/msccl_order.c collectives/msccl_build.c \
        collectives/xml_reader.c collectives/schedule.c collectives/names.c common/error.c ;;
    *) return 1 ;;
  esac
}

work=${keep:-$(mktemp -d)}
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
flags=(-g -O1 -std=gnu11 -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
  -fno-omit-frame-pointer -pthread -Wall -Wextra -Werror)
# UBSan stops at the first report, so that a report is a crash that fails the run.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0

failed=0
summary=()
for t in "${targets[@]}"; do
  src=tests/fuzz/${t}_fuzz.c
  deps=$(sources_of "$t") || {
    echo "fuzz.sh: no target '$t' (tests/fuzz/<name>_fuzz.c with its sources in sources_of)" >&2
    summary+=("$(printf '%-14s %8s %12s %8s %8s  %s' "$t" - - - - "unknown target")")
    failed=1
    continue
  }
  bin=$work/$t
  echo "== $t: build"
  # shellcheck disable=SC2086  # deps is a list of paths without spaces
  if ! clang "${flags[@]}" -o "$bin" "$src" $deps; then
    summary+=("$(printf '%-14s %8s %12s %8s %8s  %s' "$t" - - - - "BUILD FAILED")")
    failed=1
    continue
  fi
  # Every regression input and seed once: each one a crash once, fixed since.
  inputs=()
  for d in tests/fuzz/regressions/$t tests/fuzz/corpus/$t; do
    [ -d "$d" ] && while IFS= read -r f; do inputs+=("$f"); done < <(find "$d" -type f | sort)
  done
  status="ok"
  if [ ${#inputs[@]} -gt 0 ]; then
    echo "== $t: replay ${#inputs[@]} regression and seed inputs"
    if ! "$bin" -runs=1 "${inputs[@]}" >"$work/$t.replay.log" 2>&1; then
      tail -40 "$work/$t.replay.log"
      status="REGRESSION CRASHED"
      failed=1
    fi
  fi
  execs=0 cov=- ft=- crashes=0
  if [ "$seconds" -gt 0 ] && [ "$status" = ok ]; then
    echo "== $t: fuzz ${seconds}s"
    corpus=$work/corpus-$t
    mkdir -p "$corpus" "$work/artifacts-$t"
    [ -d "tests/fuzz/corpus/$t" ] && cp -r "tests/fuzz/corpus/$t/." "$corpus/"
    # A target's dictionary (tests/fuzz/<target>.dict): words of its format that random bytes
    # rarely spell, e.g. variable names.
    dict=()
    [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 "${dict[@]}" \
      -print_final_stats=1 -artifact_prefix="$work/artifacts-$t/" "$corpus" \
      >"$work/$t.log" 2>&1
    rc=$?
    execs=$(grep -oE "stat::number_of_executed_units: *[0-9]+" "$work/$t.log" | grep -oE "[0-9]+$")
    last=$(grep -E "^#[0-9]+" "$work/$t.log" | grep -E "cov: " | tail -1)
    cov=$(echo "$last" | grep -oE "cov: [0-9]+" | grep -oE "[0-9]+")
    ft=$(echo "$last" | grep -oE "ft: [0-9]+" | grep -oE "[0-9]+")
    for a in "$work/artifacts-$t"/*; do
      [ -f "$a" ] || continue
      crashes=$((crashes + 1))
      mkdir -p "tests/fuzz/regressions/$t"
      out="tests/fuzz/regressions/$t/$(basename "$a")"
      "$bin" -minimize_crash=1 -runs=20000 -exact_artifact_path="$out" "$a" >/dev/null 2>&1 ||
        cp "$a" "$out"
      [ -f "$out" ] || cp "$a" "$out"
      echo "fuzz.sh: $t crashed; input kept in $out" >&2
    done
    if [ "$rc" -ne 0 ] || [ "$crashes" -gt 0 ]; then
      grep -E "broken promise|ERROR|runtime error|SUMMARY" "$work/$t.log" | head -20
      status="CRASHED"
      failed=1
    fi
  fi
  summary+=("$(printf '%-14s %8s %12s %8s %8s  %s' "$t" "$seconds" "${execs:-0}" "${cov:--}" \
    "${ft:--}" "$status (crashes: $crashes)")")
done

echo
printf '%-14s %8s %12s %8s %8s  %s\n' target seconds execs cov ft result
for line in "${summary[@]}"; do echo "$line"; done
[ "$failed" -eq 0 ]
