#!/usr/bin/env bash
# The main job (README): install, build, record the example support agent against the
# built-in demo model, then list the recorded runs and show this one.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
export TRACE_STORE="${TRACE_STORE:-$PWD/build/demo-traces.db}"
./build/bin/trace record --label demo -- python3 examples/support_agent/agent.py --turns 3
./build/bin/trace ls
run_id="$(./build/bin/trace ls --json -n 1 |
  python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["run_id"])')"
./build/bin/trace show "$run_id"
