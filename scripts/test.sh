#!/usr/bin/env bash
# The test command (README, .ci/run): install dependencies, build, run every test that
# fits this machine, then tests once more under sanitizers (scripts/test-sanitizers.sh
# --slice: every TSan test, the server's and scheduler's included, and the ASan+UBSan tests
# that fit CI's time; docs/testing.md has the figures).
#   TRACE_SANITIZERS=slice (default)  the slice
#   TRACE_SANITIZERS=0                no sanitizer run
#   TRACE_SANITIZERS=1 (or full)      the whole sanitizer stage (ASan+UBSan also on the
#                                     recorder, the server and every parser; docs/testing.md)
# Tests labelled gpu skip themselves when no GPU is present. docs/testing.md has the details.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizers=${TRACE_SANITIZERS:-slice}
case "$sanitizers" in
  0 | slice | 1 | full) ;;
  *) echo "test.sh: TRACE_SANITIZERS is 0, slice (the default), or 1 / full" >&2; exit 2 ;;
esac
start=$SECONDS
scripts/setup.sh --with-arm64
echo "test.sh: set-up took $((SECONDS - start)) s"
start=$SECONDS
scripts/build.sh
echo "test.sh: build took $((SECONDS - start)) s"
start=$SECONDS
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
echo "test.sh: tests took $((SECONDS - start)) s"
start=$SECONDS
case "$sanitizers" in
  0) echo "test.sh: sanitizer stage not run (TRACE_SANITIZERS=0)" ;;
  slice) scripts/test-sanitizers.sh --slice ;;
  1 | full) scripts/test-sanitizers.sh ;;
esac
[[ $sanitizers == 0 ]] || echo "test.sh: sanitizer stage ($sanitizers) took $((SECONDS - start)) s"
