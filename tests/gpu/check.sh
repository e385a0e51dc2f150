#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, build (or take prebuilt binaries), run every
# `gpu` test, `trace doctor` and the GPU benchmarks, and print one summary table. The whole
# run keeps to a budget (default 470 s, under 8 minutes on one H200): each step's timeout is
# cut so that the tests after it keep their minimum; the benchmarks get what is left.
#
#   tests/gpu/check.sh                 # build here, then run
#   tests/gpu/check.sh --prebuilt DIR  # run binaries packed by tests/gpu/pack.sh (DIR/bin,
#                                      # DIR/lib, DIR/tokenizer, DIR/manifest.txt)
#   tests/gpu/check.sh --quick         # shorter benchmarks (decode batch 1 and 8 only)
#   tests/gpu/check.sh --budget 300    # seconds for the whole run
#
# Without --prebuilt (and with no .gpu-carry/ in the checkout) it configures the full project
# (cmake -DTRACE_CUDA=ON; needs the Debian -dev packages of scripts/setup.sh); if that fails,
# the standalone project tests/gpu/standalone (kernels, per-op tests, kernel benchmark: CMake
# and nvcc only). Logs go to $OUT (when set, e.g. on the device machine) or
# /tmp/trace-gpu-check. Exit 0: every test passed; 1: a test failed, was skipped on this GPU
# machine, timed out or could not run.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
LOG_DIR="${OUT:-/tmp/trace-gpu-check}"
mkdir -p "$LOG_DIR"
PREBUILT=""
QUICK=0
BUDGET=470
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prebuilt) PREBUILT="${2:?--prebuilt needs a folder}"; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --budget) BUDGET="${2:?--budget needs seconds}"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$PREBUILT" && -d "$ROOT/.gpu-carry/bin" ]]; then PREBUILT="$ROOT/.gpu-carry"; fi
if [[ -n "$PREBUILT" && ! -d "$PREBUILT/bin" ]]; then
  echo "check.sh: --prebuilt $PREBUILT: no bin/ folder there (make it with tests/gpu/pack.sh)" >&2
  exit 2
fi
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

# name -> binary; the order in which they run; their argument lists.
declare -A BIN
ORDER=(gpu_device_errors_test gpu_kernels_test gpu_engine_test gpu_moe_test replayer_gpu_test
       trace_doctor gpu_kernel_bench gpu_engine_bench)
MODE=""
if [[ -n "$PREBUILT" ]]; then
  PREBUILT="$(cd "$PREBUILT" && pwd)"
  MODE="prebuilt ($PREBUILT)"
  [[ -f "$PREBUILT/manifest.txt" ]] && sed 's/^/   /' "$PREBUILT/manifest.txt" | head -8
  [[ -d "$PREBUILT/lib" ]] && export LD_LIBRARY_PATH="$PREBUILT/lib:$LD_LIBRARY_PATH"
  [[ -d "$PREBUILT/tokenizer" ]] && export TRACE_TOKENIZER_DIR="$PREBUILT/tokenizer"
  for b in gpu_device_errors_test gpu_kernels_test gpu_engine_test gpu_moe_test \
           replayer_gpu_test gpu_kernel_bench gpu_engine_bench; do
    [[ -x "$PREBUILT/bin/$b" ]] && BIN[$b]="$PREBUILT/bin/$b"
  done
  [[ -x "$PREBUILT/bin/trace" ]] && BIN[trace_doctor]="$PREBUILT/bin/trace"
else
  BUILD="$ROOT/build-gpu"
  echo "== configure (full project) $(elapsed)s"
  # -DTRACE_UI=OFF: the device has no npm for the web app's bundler, and no test here needs it.
  if cmake -S "$ROOT" -B "$BUILD" -DTRACE_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DTRACE_UI=OFF \
       -DTRACE_CUDA_ARCHITECTURES=90 >"$LOG_DIR/configure.log" 2>&1; then
    MODE="full build ($BUILD)"
    echo "== build $(elapsed)s"
    # Targets one by one so a failure in one part does not hide the others.
    for t in gpu_kernels_test gpu_kernel_bench gpu_device_errors_test gpu_engine_test \
             gpu_moe_test gpu_engine_bench replayer_gpu_test trace; do
      timeout 300 cmake --build "$BUILD" --target "$t" -j"$JOBS" >>"$LOG_DIR/build.log" 2>&1 \
        || echo "   build of $t failed (see $LOG_DIR/build.log)"
    done
    for t in gpu_kernels_test gpu_engine_test gpu_moe_test gpu_device_errors_test; do
      [[ -x "$BUILD/tests/gpu/$t" ]] && BIN[$t]="$BUILD/tests/gpu/$t"
    done
    [[ -x "$BUILD/tests/replayer/replayer_gpu_test" ]] && BIN[replayer_gpu_test]="$BUILD/tests/replayer/replayer_gpu_test"
    [[ -x "$BUILD/bin/gpu_kernel_bench" ]] && BIN[gpu_kernel_bench]="$BUILD/bin/gpu_kernel_bench"
    [[ -x "$BUILD/bin/gpu_engine_bench" ]] && BIN[gpu_engine_bench]="$BUILD/bin/gpu_engine_bench"
    [[ -x "$BUILD/bin/trace" ]] && BIN[trace_doctor]="$BUILD/bin/trace"
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

# Binaries that cannot start here (a missing shared library, too old a C library) are named
# now, not as a cryptic failure later.
declare -A RESULT SECS NOTE
for name in "${ORDER[@]}"; do
  [[ -z "${BIN[$name]:-}" ]] && continue
  missing=$(ldd "${BIN[$name]}" 2>&1 | grep -E 'not found|version .* not found' | sed 's/^[[:space:]]*//' | tr '\n' ';')
  if [[ -n "$missing" ]]; then
    RESULT[$name]="CANNOT RUN"; SECS[$name]="-"; NOTE[$name]="ldd: $missing"
    echo "   $name cannot run here: $missing"
  fi
done

declare -A CAP=([gpu_device_errors_test]=30 [gpu_kernels_test]=150 [gpu_engine_test]=240
                [gpu_moe_test]=90 [replayer_gpu_test]=120 [trace_doctor]=90 [gpu_kernel_bench]=90
                [gpu_engine_bench]=200)
# What a step needs at least; a later test's minimum is kept out of the earlier steps' time.
declare -A MIN=([gpu_device_errors_test]=10 [gpu_kernels_test]=40 [gpu_engine_test]=60
                [gpu_moe_test]=20 [replayer_gpu_test]=20 [trace_doctor]=15 [gpu_kernel_bench]=30
                [gpu_engine_bench]=60)
declare -A ARGS=([gpu_device_errors_test]="" [gpu_kernels_test]="" [gpu_engine_test]=""
                 [gpu_moe_test]=""
                 [replayer_gpu_test]="" [trace_doctor]="doctor" [gpu_kernel_bench]=""
                 [gpu_engine_bench]="")
if [[ $QUICK == 1 ]]; then
  ARGS[gpu_kernel_bench]="--quick"
  ARGS[gpu_engine_bench]="--batches 1,8"
fi
KIND_TEST="gpu_device_errors_test gpu_kernels_test gpu_engine_test gpu_moe_test replayer_gpu_test trace_doctor"

for i in "${!ORDER[@]}"; do
  name="${ORDER[$i]}"
  if [[ -z "${BIN[$name]:-}" ]]; then
    RESULT[$name]="NOT BUILT"; SECS[$name]="-"; NOTE[$name]="not available in this mode"
    continue
  fi
  [[ -n "${RESULT[$name]:-}" ]] && continue  # cannot run (above)
  # Keep the minimum of every later test (not of the benchmarks: tests come first).
  later=0
  for j in "${!ORDER[@]}"; do
    next="${ORDER[$j]}"
    if (( j > i )) && [[ -n "${BIN[$next]:-}" && " $KIND_TEST " == *" $next "* ]]; then
      later=$(( later + MIN[$next] ))
    fi
  done
  left=$(( BUDGET - $(elapsed) - later ))
  limit=${CAP[$name]}
  (( left < limit )) && limit=$left
  # Too tight a budget for everything: this step still takes its minimum while time lasts.
  if (( limit < MIN[$name] )); then
    limit=$(( BUDGET - $(elapsed) ))
    (( limit > MIN[$name] )) && limit=${MIN[$name]}
  fi
  if (( limit < MIN[$name] / 2 )); then
    RESULT[$name]="NO TIME"; SECS[$name]="-"; NOTE[$name]="budget of ${BUDGET}s spent"
    continue
  fi
  # The engine benchmark shortens itself when its time was cut.
  args="${ARGS[$name]}"
  if [[ $name == gpu_engine_bench && $limit -lt 150 && $QUICK == 0 ]]; then args="--batches 1,8"; fi
  echo "== $name (limit ${limit}s) $(elapsed)s"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  timeout "$limit" "${BIN[$name]}" $args 2>&1 | tee "$LOG_DIR/$name.log"
  rc=${PIPESTATUS[0]}
  SECS[$name]=$(( $(date +%s) - t0 ))
  log="$LOG_DIR/$name.log"
  case $rc in
    0) RESULT[$name]="PASS" ;;
    77) RESULT[$name]="SKIPPED" ;;
    124) RESULT[$name]="TIMEOUT" ;;
    *) RESULT[$name]="FAIL (rc $rc)" ;;
  esac
  case $name in
    replayer_gpu_test)  # GoogleTest output
      # (each FAILED / SKIPPED test is listed again in the summary, without its time)
      passed=$(grep -c '^\[       OK \]' "$log" || true)
      failed=$(grep -cE '^\[  FAILED  \] [A-Za-z].*\([0-9]+ ms\)' "$log" || true)
      skipped=$(grep -cE '^\[  SKIPPED \] [A-Za-z].*\([0-9]+ ms\)' "$log" || true)
      (( skipped > 0 )) && [[ ${RESULT[$name]} == PASS ]] && RESULT[$name]="SKIPPED"
      NOTE[$name]="$passed passed, $failed failed, $skipped skipped" ;;
    trace_doctor)
      NOTE[$name]="$(grep -cE '^  [a-z].* pass ' "$log" || true) checks passed; $(tail -1 "$log" | cut -c1-90)" ;;
    *_test)
      passed=$(grep -c '^PASS ' "$log" || true)
      failed=$(grep -c '^FAIL ' "$log" || true)
      first=$(grep -m1 -E '^  .*(differ|failed|error)' "$log" | cut -c1-150 || true)
      NOTE[$name]="$passed passed, $failed failed${first:+; first: $first}" ;;
    *) NOTE[$name]="table below" ;;
  esac
done

echo
echo "== summary ($(elapsed)s of ${BUDGET}s, mode: $MODE)"
printf '%-23s %-14s %6s  %s\n' "check" "result" "secs" "notes"
for name in "${ORDER[@]}"; do
  printf '%-23s %-14s %6s  %s\n' "$name" "${RESULT[$name]}" "${SECS[$name]}" "${NOTE[$name]}"
done
if compgen -G "$LOG_DIR/gpu_*_test.log" >/dev/null; then
  echo; echo "-- per-test results"
  grep -E '^(PASS|FAIL) ' "$LOG_DIR"/gpu_*_test.log 2>/dev/null | sed 's|^.*/\([a-z_]*\)\.log:|\1: |'
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z].*\([0-9]+ ms\)' "$LOG_DIR/replayer_gpu_test.log" 2>/dev/null | sed 's|^|replayer_gpu_test: |'
fi
for b in gpu_kernel_bench gpu_engine_bench; do
  if [[ -f "$LOG_DIR/$b.log" ]]; then echo; echo "-- $b"; cat "$LOG_DIR/$b.log"; fi
done
# A GPU is here (nvidia-smi answered): a test that skipped, or could not run, is a failure.
status=0
for name in $KIND_TEST; do
  case "${RESULT[$name]}" in
    PASS) ;;
    "NOT BUILT") [[ -z "$PREBUILT" && $MODE == standalone* && $name != gpu_kernels_test ]] || status=1 ;;
    *) status=1 ;;
  esac
done
exit $status
