#!/usr/bin/env bash
# test_stages_test.sh -- scripts/test.sh's stage bookkeeping, with stand-ins for bazel and the
# dependency installer: STAGES picks stages, a name that is not a stage is refused, and the end
# report gives each stage that ran its tally (passes and failures counted from bazel's lines).
set -euo pipefail
script=$(readlink -f scripts/test.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/scripts" "$work/bin"
cp "$script" "$work/scripts/test.sh"
printf '#!/bin/sh\nexit 0\n' >"$work/scripts/install-deps.sh"
# Every invocation: two tests pass, one fails (the failing one counts, and so does bazel's status).
cat >"$work/bin/bazel" <<'STUB'
#!/bin/sh
echo "//tests/x:a_test   PASSED in 0.1s"
echo "//tests/x:b_test   PASSED in 0.1s"
echo "//tests/x:c_test   FAILED in 0.1s"
exit 3
STUB
chmod +x "$work/scripts/install-deps.sh" "$work/bin/bazel"
export PATH="$work/bin:$PATH"

out=$(STAGES="asan nocuda" bash "$work/scripts/test.sh" 2>&1) && {
  echo "FAIL: a run with failures exited 0"
  exit 1
}
echo "$out" | tail -6
echo "$out" | grep -qE "^asan +[0-9]+s +2 passed +1 failed$" || { echo "FAIL: no asan line"; exit 1; }
echo "$out" | grep -qE "^nocuda +[0-9]+s +2 passed +1 failed$" || { echo "FAIL: no nocuda line"; exit 1; }
if echo "$out" | grep -qE "^(build|tsan|python|fuzz) "; then
  echo "FAIL: a stage not in STAGES ran"
  exit 1
fi
echo "$out" | grep -q "^weft tests: 4 passed, 2 failed$" || { echo "FAIL: wrong total"; exit 1; }

if STAGES="asan nosuchstage" bash "$work/scripts/test.sh" >"$work/err" 2>&1; then
  echo "FAIL: an unknown stage was accepted"
  exit 1
fi
grep -q "STAGES names 'nosuchstage', which is not a stage" "$work/err" || {
  cat "$work/err"
  echo "FAIL: no message naming the unknown stage"
  exit 1
}
echo PASS
