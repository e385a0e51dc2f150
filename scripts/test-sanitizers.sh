#!/usr/bin/env bash
# The tests once more under sanitizers, as CI runs them after the plain run (scripts/test.sh):
#   asan  build-asan/ with ASan+UBSan (every report fatal): the unit, e2e and fuzz tests.
#   tsan  build-tsan/ with TSan: the tests whose subject is concurrency (the store's
#         writers and readers, the kernel thread pool, the server and its scheduler).
# Both build without CUDA and benchmarks (neither runs here). Usage:
#   scripts/test-sanitizers.sh [asan] [tsan]     (default: both)
# Extra cmake arguments can come from $TRACE_SANITIZER_CMAKE_ARGS (e.g. a compiler launcher).
set -euo pipefail
cd "$(dirname "$0")/.."

which=("$@")
((${#which[@]})) || which=(asan tsan)
jobs=$(nproc)
read -r -a extra <<<"${TRACE_SANITIZER_CMAKE_ARGS:-}"

configure() {  # DIR SANITIZERS
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release -DTRACE_SANITIZE="$2" -DTRACE_CUDA=OFF \
    -DTRACE_BUILD_BENCH=OFF "${extra[@]}" >/dev/null
}

# The concurrency tests TSan runs (ctest -R), and the binaries that hold them.
tsan_tests='^(StoreWriter\.ManyThreads|StoreConcurrency\.|KernelsThreadPool\.|ServerTest\.(SixteenConcurrentClients|StreamingEqualsNonStreaming|ProxyMode))'
tsan_targets=(store_test kernels_test recorder_server_test)

for w in "${which[@]}"; do
  case "$w" in
    asan)
      echo "test-sanitizers: ASan+UBSan build (build-asan)"
      configure build-asan address,undefined
      cmake --build build-asan -j"$jobs"
      # halt_on_error: the first report fails the test; detect_leaks: LSan is part of ASan.
      ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:strict_string_checks=1 \
        UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 1800 \
        -L 'unit|e2e|fuzz' -LE gpu
      ;;
    tsan)
      echo "test-sanitizers: TSan build (build-tsan: ${tsan_targets[*]})"
      configure build-tsan thread
      cmake --build build-tsan -j"$jobs" --target "${tsan_targets[@]}"
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 1800 \
        -R "$tsan_tests"
      ;;
    *)
      echo "test-sanitizers: unknown '$w' (asan, tsan)" >&2
      exit 2
      ;;
  esac
done
