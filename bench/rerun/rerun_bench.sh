#!/usr/bin/env bash
# Re-run time ÷ record time of the example agent (examples/support_agent), measured in the
# same session, interleaved (record, re-run, record, re-run, ...) so that the shared
# machine's load falls on both alike. Each re-run follows its recording (exit 0, every model
# call answered from the recording); the figure is the median re-run time over the median
# record time, whole `trace` processes (start, model load, agent, store) included.
#
#   bench/rerun/rerun_bench.sh [--rounds N] [--turns T] [--model DIR] [--hosted]
#   TRACE=build/bin/trace (default)
#
# --hosted: record through --upstream (a `trace serve` on the same model playing the hosted
# model, as a hosted API would) and re-run offline (no model at all: the cassette alone).
set -euo pipefail
TRACE=${TRACE:-build/bin/trace}
ROUNDS=5
TURNS=3
MODEL=""
HOSTED=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --turns) TURNS=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --hosted) HOSTED=1; shift ;;
    *) echo "usage: $0 [--rounds N] [--turns T] [--model DIR] [--hosted]" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
serve_pid=""
trap '[[ -n "$serve_pid" ]] && kill "$serve_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
export XDG_DATA_HOME="$tmp/xdg" TRACE_STORE="$tmp/traces.db"
if [[ -z "$MODEL" ]]; then
  MODEL="$tmp/model"
  "$TRACE" model init --preset tiny --seed 1 "$MODEL" >/dev/null
fi
agent=(python3 "$here/examples/support_agent/agent.py" --turns "$TURNS")
source=(--model "$MODEL")
if [[ $HOSTED == 1 ]]; then
  "$TRACE" serve --model "$MODEL" --port 0 >"$tmp/serve.out" &
  serve_pid=$!
  for _ in $(seq 600); do grep -q "serving on" "$tmp/serve.out" && break; sleep 0.1; done
  source=(--upstream "$(sed -n 's/^serving on //p' "$tmp/serve.out")")
fi
now() { date +%s%N; }
record_ns=()
rerun_ns=()
# One warm-up of each (page cache, Python bytecode), not counted.
"$TRACE" -q record "${source[@]}" --seed 3 -- "${agent[@]}" >/dev/null
run=$("$TRACE" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["run_id"])')
"$TRACE" -q rerun "$run" -- "${agent[@]}" >/dev/null
for ((i = 0; i < ROUNDS; ++i)); do
  t0=$(now)
  "$TRACE" -q record "${source[@]}" --seed $((10 + i)) -- "${agent[@]}" >/dev/null
  t1=$(now)
  run=$("$TRACE" ls --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["run_id"])')
  t2=$(now)
  "$TRACE" -q rerun "$run" -- "${agent[@]}" >/dev/null || {
    echo "re-run of $run did not follow its recording" >&2
    exit 1
  }
  t3=$(now)
  record_ns+=($((t1 - t0)))
  rerun_ns+=($((t3 - t2)))
done
python3 - "${record_ns[*]}" "${rerun_ns[*]}" "$ROUNDS" "$TURNS" "$HOSTED" <<'PY'
import statistics, sys
rec = [int(x) / 1e6 for x in sys.argv[1].split()]
rer = [int(x) / 1e6 for x in sys.argv[2].split()]
mr, mu = statistics.median(rec), statistics.median(rer)
print("example agent, %s turns (%d model calls), %s rounds%s" % (
    sys.argv[4], 2 * int(sys.argv[4]), sys.argv[3],
    ", recorded through --upstream, re-run offline" if sys.argv[5] == "1" else ""))
print("record: median %.0f ms (min %.0f, max %.0f)" % (mr, min(rec), max(rec)))
print("re-run: median %.0f ms (min %.0f, max %.0f)" % (mu, min(rer), max(rer)))
print("re-run time / record time: %.3f" % (mu / mr))
PY
