#!/usr/bin/env bash
# The test command (README, .ci/run): install dependencies, build, run every test that
# fits this machine, then the tests again under sanitizers: unit, e2e and fuzz under
# ASan+UBSan, the concurrency tests under TSan (scripts/test-sanitizers.sh). Tests
# labelled gpu skip themselves when no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
scripts/test-sanitizers.sh asan tsan
