#!/usr/bin/env bash
# The main job (README): install, build, record the example support agent against the
# built-in demo model, list the recorded runs, show this one and replay it.
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
# Re-execute every model call of the run on the deterministic engine: it must reproduce
# bit for bit (exit 0), or the replay names the first divergent token (exit 1).
./build/bin/trace replay "$run_id"
