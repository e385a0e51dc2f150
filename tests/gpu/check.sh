#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, build (or take prebuilt binaries), run
# every `gpu` test and the GPU benchmarks, and print one summary table. Meant to finish
# within 8 minutes on one H200.
#
#   tests/gpu/check.sh                 # build here, then run
#   tests/gpu/check.sh --prebuilt DIR  # run binaries packed by tests/gpu/pack.sh (DIR/bin,
#                                      # DIR/lib for shared libraries, DIR/tokenizer)
#   tests/gpu/check.sh --quick         # fewer benchmark repetitions, decode batch 1 and 8
#
# Build order when nothing is prebuilt: the full project (cmake -DTRACE_CUDA=ON; needs the
# Debian -dev packages of scripts/setup.sh); if that configure fails, the standalone
# project tests/gpu/standalone (kernels, per-op tests, kernel benchmark: CMake + nvcc only).
# Logs go to $OUT (when set, e.g. on the device machine) or /tmp/trace-gpu-check.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
LOG_DIR="${OUT:-/tmp/trace-gpu-check}"
mkdir -p "$LOG_DIR"
PREBUILT=""
QUICK=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prebuilt) PREBUILT="$2"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ -z "$PREBUILT" && -d "$ROOT/.gpu-carry/bin" ]]; then PREBUILT="$ROOT/.gpu-carry"; fi
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }

echo "== device"
if ! nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader; then
  echo "check.sh: nvidia-smi failed: no usable NVIDIA GPU here" >&2
  exit 1
fi
export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export TRACE_SOURCE_DIR="$ROOT"
JOBS="$(nproc)"

declare -A BIN
MODE=""
if [[ -n "$PREBUILT" ]]; then
  MODE="prebuilt ($PREBUILT)"
  [[ -d "$PREBUILT/lib" ]] && export LD_LIBRARY_PATH="$PREBUILT/lib:$LD_LIBRARY_PATH"
  [[ -d "$PREBUILT/tokenizer" ]] && export TRACE_TOKENIZER_DIR="$PREBUILT/tokenizer"
  for b in gpu_device_errors_test gpu_kernels_test gpu_engine_test gpu_kernel_bench gpu_engine_bench; do
    [[ -x "$PREBUILT/bin/$b" ]] && BIN[$b]="$PREBUILT/bin/$b"
  done
else
  BUILD="$ROOT/build-gpu"
  echo "== configure (full project) $(elapsed)s"
  if cmake -S "$ROOT" -B "$BUILD" -DTRACE_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
       -DTRACE_CUDA_ARCHITECTURES=90 >"$LOG_DIR/configure.log" 2>&1; then
    MODE="full build ($BUILD)"
    echo "== build $(elapsed)s"
    # Targets one by one so a failure in one part does not hide the others.
    for t in gpu_kernels_test gpu_kernel_bench gpu_device_errors_test gpu_engine_test gpu_engine_bench; do
      timeout 300 cmake --build "$BUILD" --target "$t" -j"$JOBS" >>"$LOG_DIR/build.log" 2>&1 \
        || echo "   build of $t failed (see $LOG_DIR/build.log)"
    done
    [[ -x "$BUILD/tests/gpu/gpu_kernels_test" ]] && BIN[gpu_kernels_test]="$BUILD/tests/gpu/gpu_kernels_test"
    [[ -x "$BUILD/tests/gpu/gpu_engine_test" ]] && BIN[gpu_engine_test]="$BUILD/tests/gpu/gpu_engine_test"
    [[ -x "$BUILD/tests/gpu/gpu_device_errors_test" ]] && BIN[gpu_device_errors_test]="$BUILD/tests/gpu/gpu_device_errors_test"
    [[ -x "$BUILD/bin/gpu_kernel_bench" ]] && BIN[gpu_kernel_bench]="$BUILD/bin/gpu_kernel_bench"
    [[ -x "$BUILD/bin/gpu_engine_bench" ]] && BIN[gpu_engine_bench]="$BUILD/bin/gpu_engine_bench"
  else
    BUILD="$ROOT/build-gpu-standalone"
    MODE="standalone kernels build ($BUILD; full configure failed: $LOG_DIR/configure.log)"
    echo "== full configure failed; standalone build $(elapsed)s"
    if cmake -S "$ROOT/tests/gpu/standalone" -B "$BUILD" -DTRACE_CUDA_ARCHITECTURES=90 \
         >"$LOG_DIR/configure-standalone.log" 2>&1 &&
       timeout 300 cmake --build "$BUILD" -j"$JOBS" >"$LOG_DIR/build.log" 2>&1; then
      BIN[gpu_kernels_test]="$BUILD/gpu_kernels_test"
      BIN[gpu_kernel_bench]="$BUILD/gpu_kernel_bench"
    else
      echo "check.sh: standalone build failed; see $LOG_DIR/build.log" >&2
      tail -30 "$LOG_DIR/build.log" >&2
    fi
  fi
fi
echo "== mode: $MODE ($(elapsed)s)"

# name | timeout | args
declare -a ORDER=(gpu_device_errors_test gpu_kernels_test gpu_engine_test gpu_kernel_bench gpu_engine_bench)
declare -A TIMEOUT=([gpu_device_errors_test]=30 [gpu_kernels_test]=120 [gpu_engine_test]=240 [gpu_kernel_bench]=90 [gpu_engine_bench]=200)
declare -A ARGS=([gpu_device_errors_test]="" [gpu_kernels_test]="" [gpu_engine_test]="" [gpu_kernel_bench]="" [gpu_engine_bench]="")
if [[ $QUICK == 1 ]]; then
  ARGS[gpu_kernel_bench]="--quick"
  ARGS[gpu_engine_bench]="--batches 1,8"
fi
declare -A RESULT SECS NOTE
for name in "${ORDER[@]}"; do
  if [[ -z "${BIN[$name]:-}" ]]; then
    RESULT[$name]="NOT BUILT"; SECS[$name]="-"; NOTE[$name]="not available in this mode"
    continue
  fi
  echo "== $name $(elapsed)s"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout "${TIMEOUT[$name]}" "${BIN[$name]}" ${ARGS[$name]} 2>&1 | tee "$LOG_DIR/$name.log"
  rc=${PIPESTATUS[0]}
  SECS[$name]=$(( $(date +%s) - t0 ))
  case $rc in
    0) RESULT[$name]="PASS" ;;
    77) RESULT[$name]="SKIPPED" ;;
    124) RESULT[$name]="TIMEOUT" ;;
    *) RESULT[$name]="FAIL (rc $rc)" ;;
  esac
  if [[ $name == *_test ]]; then
    passed=$(grep -c '^PASS ' "$LOG_DIR/$name.log" || true)
    failed=$(grep -c '^FAIL ' "$LOG_DIR/$name.log" || true)
    first=$(grep -m1 -E '^  .*(differ|failed|error)' "$LOG_DIR/$name.log" | cut -c1-150 || true)
    NOTE[$name]="$passed passed, $failed failed${first:+; first: $first}"
  else
    NOTE[$name]="table below"
  fi
done

echo
echo "== summary ($(elapsed)s total, mode: $MODE)"
printf '%-18s %-14s %6s  %s\n' "check" "result" "secs" "notes"
for name in "${ORDER[@]}"; do
  printf '%-18s %-14s %6s  %s\n' "$name" "${RESULT[$name]}" "${SECS[$name]}" "${NOTE[$name]}"
done
if [[ -f "$LOG_DIR/gpu_kernels_test.log" ]]; then
  echo; echo "-- per-test results"; grep -E '^(PASS|FAIL) ' "$LOG_DIR/gpu_kernels_test.log" "$LOG_DIR/gpu_engine_test.log" "$LOG_DIR/gpu_device_errors_test.log" 2>/dev/null | sed 's|^.*/\([a-z_]*\)\.log:|\1: |'
fi
for b in gpu_kernel_bench gpu_engine_bench; do
  if [[ -f "$LOG_DIR/$b.log" ]]; then echo; echo "-- $b"; cat "$LOG_DIR/$b.log"; fi
done
status=0
for name in gpu_device_errors_test gpu_kernels_test gpu_engine_test; do
  [[ "${RESULT[$name]}" == PASS || "${RESULT[$name]}" == "NOT BUILT" ]] || status=1
done
exit $status
