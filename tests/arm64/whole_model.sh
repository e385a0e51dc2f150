#!/usr/bin/env bash
# Whole models on aarch64, checked on x86 under emulation (docs/numerics.md, "Machines"):
# cross-compiles the trace binary for aarch64 (tests/arm64/aarch64-linux-gnu.cmake, against
# Debian's arm64 libraries; scripts/setup.sh --with-arm64 installs them) and runs it under qemu-aarch64
# beside the x86 trace given by --trace:
#   0. `trace doctor`: the kernel self-test and the golden prompts' digests on NEON and scalar;
#   1. for a dense (tiny, gemma3-tiny) and a MoE (qwen3-moe-tiny) preset, every logit of a
#      prompt (`trace logits --all --json`) on x86's best path and on aarch64's NEON and scalar
#      paths: byte-equal (the JSON writes each f32 exactly);
#   2. the demo agent recorded on x86 on tiny and on qwen3-moe-tiny, each run replayed on
#      aarch64 from the same store file: bitwise (`trace replay`'s default --require), with the
#      kernel path and the CPU named as "same contract" differences.
#
#   tests/arm64/whole_model.sh --trace X86_TRACE [--build-dir DIR] [--work-dir DIR]
#
# Exit 0: every check held; 1: one did not (the line says which); 2: tools missing or the
# build failed. Takes a few minutes, most of them the cross build (kept in DIR for the next run).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$ROOT/build/arm64-trace"
HOST_TRACE=""
WORK=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --trace) HOST_TRACE="${2:?--trace needs the x86 trace binary}"; shift 2 ;;
    --build-dir) BUILD="${2:?--build-dir needs a folder}"; shift 2 ;;
    --work-dir) WORK="${2:?--work-dir needs a folder}"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "arm64/whole_model.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
say() { echo "arm64/whole_model.sh: $*"; }
fail() { echo "arm64/whole_model.sh: FAILED: $*" >&2; exit 1; }
[[ -x $HOST_TRACE ]] || { echo "arm64/whole_model.sh: --trace: '$HOST_TRACE' is not an executable" >&2; exit 2; }
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "arm64/whole_model.sh: $tool is not installed (scripts/setup.sh installs it)" >&2; exit 2; }
done
[[ -e /usr/lib/aarch64-linux-gnu/libsqlite3.so && -e /lib/ld-linux-aarch64.so.1 ]] || {
  echo "arm64/whole_model.sh: no arm64 libraries (scripts/setup.sh --with-arm64 installs Debian's, as scripts/test.sh does)" >&2; exit 2; }

start=$SECONDS
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/tests/arm64/aarch64-linux-gnu.cmake" -DTRACE_CUDA=OFF \
  -DTRACE_POSTGRES=OFF -DTRACE_BUILD_TESTS=OFF -DTRACE_BUILD_BENCH=OFF -DTRACE_BUILD_FUZZ=OFF \
  >"$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log" >&2; exit 2; }
cmake --build "$BUILD" -j"$(nproc)" --target trace >"$BUILD.build.log" 2>&1 ||
  { tail -40 "$BUILD.build.log" >&2; exit 2; }
ARM_TRACE="$BUILD/bin/trace"
say "built trace for aarch64 in $((SECONDS - start)) s"

if [[ -z $WORK ]]; then
  WORK="$(mktemp -d)"
  # Removed on success; kept (and named) on failure, for the files the message points at.
  trap 'status=$?; if [[ $status == 0 ]]; then rm -rf "$WORK"; else echo "arm64/whole_model.sh: kept $WORK" >&2; fi' EXIT
fi
mkdir -p "$WORK"
export XDG_DATA_HOME="$WORK/xdg"
arm() { qemu-aarch64 "$ARM_TRACE" "$@"; }

# 0. trace doctor on aarch64: the kernel self-test and the golden prompts' pinned digests
# (pinned on x86) on every path it has.
start=$SECONDS
arm doctor >"$WORK/doctor.txt" 2>&1 || { cat "$WORK/doctor.txt" >&2; fail "trace doctor on aarch64"; }
grep -q "kernel path   neon" "$WORK/doctor.txt" || { cat "$WORK/doctor.txt" >&2; fail "trace doctor on aarch64 does not name the NEON path"; }
say "trace doctor on aarch64: every pinned digest on neon and reference ($((SECONDS - start)) s)"

# 1. logits.
X86_PATH=$("$HOST_TRACE" doctor --no-model --json 2>/dev/null |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["machine"]["cpu_kernel_path"])')
PROMPT="The quick brown fox asked the support agent to delete record 42, then changed its mind."
start=$SECONDS
for preset in tiny gemma3-tiny qwen3-moe-tiny; do
  model="$WORK/$preset"
  rm -rf "$model"
  "$HOST_TRACE" model init --preset "$preset" --seed 7 "$model" >/dev/null
  "$HOST_TRACE" logits --model "$model" --prompt "$PROMPT" --all --json >"$WORK/$preset.x86.json"
  for isa in neon scalar; do
    TRACE_CPU_ISA=$isa arm logits --model "$model" --prompt "$PROMPT" --all --json \
      >"$WORK/$preset.$isa.json" || fail "$preset: trace logits on aarch64 ($isa) failed"
    cmp -s "$WORK/$preset.x86.json" "$WORK/$preset.$isa.json" ||
      fail "$preset: the logits on aarch64 ($isa) differ from x86's ($X86_PATH): $WORK/$preset.{x86,$isa}.json"
  done
  n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["logits"]))' "$WORK/$preset.x86.json")
  say "$preset: all $n logits equal on x86 ($X86_PATH), aarch64 neon and aarch64 scalar"
done
say "logits checked in $((SECONDS - start)) s"

# 2. a recording made on x86, replayed on aarch64.
start=$SECONDS
store="$WORK/traces.db"
rm -f "$store"
for preset in tiny qwen3-moe-tiny; do
  "$HOST_TRACE" --store "$store" record --model "$WORK/$preset" --label "arm64-$preset" -- \
    python3 "$ROOT/examples/support_agent/agent.py" --turns 2 >"$WORK/record.$preset.log" 2>&1 ||
    { cat "$WORK/record.$preset.log" >&2; fail "$preset: recording the demo agent on x86 failed"; }
  run=$("$HOST_TRACE" --store "$store" ls --json | python3 -c '
import json, sys
runs = json.load(sys.stdin)
runs = runs.get("runs", runs) if isinstance(runs, dict) else runs
print(next(r["run_id"] for r in runs if r.get("label") == sys.argv[1]))' "arm64-$preset")
  status=0
  arm --store "$store" replay "$run" --json >"$WORK/replay.$preset.json" || status=$?
  [[ $status == 0 ]] || { cat "$WORK/replay.$preset.json" >&2; fail "$preset: run $run recorded on x86 did not replay bitwise on aarch64 (exit $status)"; }
  python3 - "$WORK/replay.$preset.json" "$preset" <<'PY' || exit 1
import json, sys
report = json.load(open(sys.argv[1]))
diffs = {d["field"]: d for d in report.get("fingerprint_differences", [])}
kernel = diffs.get("engine.kernel_impl")
if kernel is None or not kernel.get("same_contract"):
    sys.exit(f"arm64/whole_model.sh: FAILED: {sys.argv[2]}: the replay does not name the kernel path as a same-contract difference: {sorted(diffs)}")
calls = report.get("calls", [])
print(f"arm64/whole_model.sh: {sys.argv[2]}: {len(calls)} calls recorded on x86 ({kernel.get('recorded')}) replayed bitwise on aarch64 ({kernel.get('current')}), same contract")
PY
done
say "recorded and replayed in $((SECONDS - start)) s"
