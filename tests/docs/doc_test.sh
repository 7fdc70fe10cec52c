#!/usr/bin/env bash
# doc_test.sh -- runs doc_test.py from the test's runfiles (which hold what Bazel built, laid out
# as bazel-bin); the docs themselves are read from the checkout the runfiles link into.
set -euo pipefail
exec "${DOC_TEST_PYTHON:-/usr/bin/python3}" tests/docs/doc_test.py --bin . "$@"
