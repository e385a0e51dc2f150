#!/usr/bin/env bash
# The main job (README): install, build, and run trace.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
./build/bin/trace --help
