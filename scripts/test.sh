#!/usr/bin/env bash
# The test command (README, .ci/run): install dependencies, build, run every test that
# fits this machine. Tests labelled gpu skip themselves when no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900
