#!/usr/bin/env bash
# The tests once more under sanitizers. scripts/test.sh (the README's test command, and so
# CI) runs the --slice below after the plain run, and the whole stage with
# TRACE_SANITIZERS=1 (docs/testing.md).
# docs/testing.md says exactly what runs, why, and what it costs.
#   asan  build-asan/: ASan+UBSan (every report fatal, LeakSanitizer on) at -O0: the tests
#         of the parsers (every fuzz target's seeds and corpus, the request, event, schema,
#         tokenizer, template and redaction unit tests), of the server (in process, over
#         HTTP) and of the store.
#   tsan  build-tsan/: TSan at -O1: the tests whose subject is concurrency: the server (its
#         scheduler, streaming, proxying, commit waits), its connection layer, the run log,
#         the store's concurrent writers and readers and the kernel thread pool.
# Each builds only the binaries its tests need, without CUDA and benchmarks. With both, the
# two builds run side by side, then the two test runs: each fills the cores the other
# leaves idle (its links, its longest test); their output is printed when both are done.
# Usage:
#   scripts/test-sanitizers.sh [--slice | --all] [asan] [tsan]     (default: both)
# --slice: the part of the stage CI runs by default (scripts/test.sh): all of TSan, and of
# ASan+UBSan what fits CI's time (docs/testing.md: the figures).
# --all: ASan+UBSan builds and runs every unit, e2e and fuzz test instead (the `trace`
# binary and its CLI tests too; about twice the time, too long for CI).
# Extra cmake arguments can come from $TRACE_SANITIZER_CMAKE_ARGS (e.g. a compiler launcher).
set -euo pipefail
cd "$(dirname "$0")/.."

all=0
slice=0
which=()
for a in "$@"; do
  case "$a" in
    --all) all=1 ;;
    --slice) slice=1 ;;
    asan | tsan) which+=("$a") ;;
    *) echo "test-sanitizers: unknown '$a' (--slice, --all, asan, tsan)" >&2; exit 2 ;;
  esac
done
((${#which[@]})) || which=(asan tsan)
jobs=$(nproc)
read -r -a extra <<<"${TRACE_SANITIZER_CMAKE_ARGS:-}"

configure() {  # DIR SANITIZERS OPT
  # Ninja where there is one (setup.sh installs it), unless DIR was made with another
  # generator: `cmake --build --target A B ...` with Makefiles builds one target after the
  # other, each binary of a single file on one core; Ninja builds them side by side.
  local gen=()
  [[ ! -f $1/CMakeCache.txt ]] && command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$1" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTRACE_SANITIZE="$2" -DTRACE_CUDA=OFF \
    -DTRACE_BUILD_BENCH=OFF -DTRACE_TEST_CXX_FLAGS= "-DCMAKE_CXX_FLAGS_RELEASE=$3 -DNDEBUG" \
    "-DCMAKE_C_FLAGS_RELEASE=$3 -DNDEBUG" "${extra[@]}" >/dev/null
}

stage() {  # NAME START: one line a stage, so a CI log shows where the time went
  echo "test-sanitizers: $1 took $((SECONDS - $2)) s"
}

# run_built DIR ONLY CTEST_ARGS...: ctest on those of DIR's tests whose binary was built
# there (and is one of the space-separated names ONLY, when not empty), restricted further
# by CTEST_ARGS. A partial build leaves placeholder tests for the binaries it did not build,
# an earlier run with more targets may have left others, and script tests (the lint checks)
# already ran in the plain stage.
run_built() {
  local dir=$1 only=$2
  shift 2
  local regex
  regex=$(ctest --test-dir "$dir" --show-only=json-v1 "$@" | python3 -c '
import json, os, re, sys
build = os.path.abspath(sys.argv[1])
only = set(sys.argv[2].split())
names = []
for t in json.load(sys.stdin)["tests"]:
    cmd = t.get("command") or []
    if t["name"].endswith("_NOT_BUILT") or not cmd:
        continue
    ours = [a for a in cmd if a.startswith(build + "/")]
    if only and os.path.basename(cmd[0]) not in only:
        continue
    if ours and all(os.path.exists(a) for a in ours):  # runs a binary built here
        names.append(re.sub(r"([][.*+?^$(){}|\\])", r"\\\1", t["name"]))
if not names:
    sys.exit("test-sanitizers: no test of " + build + " was built")
print("^(" + "|".join(names) + ")$")
' "$dir" "$only")
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 1800 "$@" -R "$regex"
}

# ASan+UBSan: the parsers, the server and the store (docs/testing.md: why these).
asan_targets=(
  # parsers: every fuzz target replays its seeds and corpus (label fuzz)
  safetensors_fuzz gguf_fuzz model_config_fuzz tokenizer_load_fuzz tokenizer_load_diff_fuzz
  tokenizer_encode_fuzz template_fuzz store_row_fuzz openai_request_fuzz event_api_fuzz
  json_schema_fuzz responses_request_fuzz anthropic_request_fuzz embeddings_fuzz redact_fuzz
  export_inputs_fuzz ordered_json_fuzz
  # parsers: requests, events, schemas, hostile JSON, tokenizer, templates, redaction, errors
  recorder_unit_test recorder_api_formats_test recorder_hardening_unit_test recorder_grammar_test
  recorder_errors_test error_message_test tokenizer_test tokenizer_load_diff_test engine_gguf_test
  template_unit_test redact_test otlp_trace_test
  # the server over HTTP, and under hostile clients (the Responses/Anthropic/compat suites
  # run the demo model in every test, ~10x slower at -O0; their parsers are covered by the fuzz
  # targets and recorder_api_formats_test above)
  recorder_server_test recorder_hostile_input_test
  # the store: writers, readers, group commit, locks, full disk, checksums, fsck
  store_test store_durability_test store_integrity_test
)

# TSan: what it runs (ctest -R) and the binaries that hold it. Value-parameterised suites
# are named PREFIX/Suite.Test/PARAM. Of the server's tests, those where threads meet: 16
# clients through the scheduler, a stream beside whole answers, the proxy's connection
# pool, answers waiting on the commit thread (each runs the demo model, 10-20x slower
# under TSan; the single-client ones add no thread interplay).
tsan_tests='(^|/)(ServerTest\.(SixteenConcurrentClients|StreamingEqualsNonStreaming|ProxyMode|AnswersWaitForTheCommit)|(HostileInputTest|ServerLifecycle|RunLog|StoreWriter|StoreConcurrency|StoreGroupCommit|StoreLock|StoreOpenConcurrency|KernelsThreadPool)\.)'
tsan_targets=(recorder_server_test recorder_hostile_input_test recorder_unit_test store_test
              store_durability_test kernels_test)

# --slice, what scripts/test.sh (so CI) runs by default. TSan: all of the above, the
# server's and the scheduler's tests included. ASan+UBSan: the parsers that need neither
# the server nor the engine's forward pass: every seed and corpus input of the
# tokenizer.json loader, the tokenizer's encoder (and its unit tests: Qwen3's vocabulary,
# about 7 s a test at -O0), the chat templates, stored rows, redaction rules and every
# HTTP request parser of the recorder (OpenAI chat/completions, Responses, Anthropic
# messages, JSON Schemas for constrained output: trace_recorder_api, no engine, store or
# httplib);
# the request-format, schema-grammar, template, redaction and escaping unit tests; and the
# store (round trips, checksums and byte flips, fsck, read-only stores, group commit, held
# locks, a full store). Left to the whole stage: what links the server or the engine under
# ASan+UBSan (too long for CI), the schema grammar's MatcherTests (each loads Qwen3's
# 151,669-token tokenizer and builds its token index: 11-37 s each at -O0 under ASan, about
# 60 CPU s for the four), and two chat-template tests that run at the default render limits
# (a million steps, 256 MiB, 200,000 namespaces: 30-60 s each at -O0 under ASan; the other
# template tests and template_fuzz's regression inputs run the same checks at smaller
# RenderLimits), and the tests that a million-item list, a million-key object or the
# 49,000 tools a request may hold are handled in linear time (up to 45 s each at -O0 under
# ASan; their small cases stay in):
# slice_asan_exclude.
slice_asan_targets=(ordered_json_fuzz tokenizer_load_fuzz tokenizer_load_diff_fuzz tokenizer_encode_fuzz
                    tokenizer_test template_fuzz store_row_fuzz redact_fuzz openai_request_fuzz
                    responses_request_fuzz anthropic_request_fuzz embeddings_fuzz json_schema_fuzz
                    recorder_api_formats_test recorder_grammar_test store_test
                    store_integrity_test store_durability_test template_unit_test redact_test
                    base_test)
slice_asan_exclude='^(MatcherTest\.|ChatTemplate\.(DefaultRenderLimitsAreAMillionStepsAnd256MiB|LongChainsOfNamespacesAreFreedWithoutRecursion|LongListsAndLargeDictsTakeLinearTime)$|OrderedJson\.AMillionKeysParseInLinearTime$|ToolFields\.AMillionToolsAreRefusedAndTheMostALimitAllowsAreChecked$)'
if ((slice && all)); then
  echo "test-sanitizers: --slice and --all exclude each other" >&2
  exit 2
fi
if ((slice)); then
  asan_targets=("${slice_asan_targets[@]}")
fi

asan_build() {
  local start=$SECONDS
  # -O0: ASan+UBSan at -O1 costs about 1.7x the compile time of the Release build,
  # at -O0 about 1.1x (docs/testing.md); none of these tests is compute-bound.
  echo "test-sanitizers: ASan+UBSan build (build-asan)"
  configure build-asan address,undefined -O0
  if ((all)); then
    cmake --build build-asan -j"$jobs"
  else
    cmake --build build-asan -j"$jobs" --target "${asan_targets[@]}"
  fi
  stage "ASan+UBSan build" "$start"
}

asan_tests() {
  local start=$SECONDS exclude=()
  if ((slice)); then
    exclude=(-E "$slice_asan_exclude")
  fi
  # halt_on_error: the first report fails the test; detect_leaks: LSan is part of ASan.
  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:strict_string_checks=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    run_built build-asan "$( ((all)) || echo "${asan_targets[*]}")" -L 'unit|e2e|fuzz' -LE 'gpu' \
    "${exclude[@]}"
  stage "ASan+UBSan tests" "$start"
}

tsan_build() {
  local start=$SECONDS
  echo "test-sanitizers: TSan build (build-tsan: ${tsan_targets[*]})"
  configure build-tsan thread -O1
  cmake --build build-tsan -j"$jobs" --target "${tsan_targets[@]}"
  stage "TSan build" "$start"
}

tsan_tests_run() {
  local start=$SECONDS
  # tests/sanitizers/tsan.supp: the uninstrumented httplib library (why, in the file).
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 1800 \
    -R "$tsan_tests"
  stage "TSan tests" "$start"
}

# side_by_side FN...: runs the functions at once, each with its output in a file, then
# prints the outputs in order (so a log reads as if they had run one after the other);
# fails if any failed.
side_by_side() {
  local pids=() logs=() rc=0 i
  for f in "$@"; do
    logs+=("$(mktemp)")
    "$f" >"${logs[-1]}" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[i]}" || rc=1
  done
  for i in "${!logs[@]}"; do
    cat "${logs[i]}"
    rm -f "${logs[i]}"
  done
  return "$rc"
}

builds=()
runs=()
for w in "${which[@]}"; do
  case "$w" in
    asan) builds+=(asan_build) runs+=(asan_tests) ;;
    tsan) builds+=(tsan_build) runs+=(tsan_tests_run) ;;
  esac
done
start=$SECONDS
side_by_side "${builds[@]}"
stage "builds (side by side)" "$start"
start=$SECONDS
side_by_side "${runs[@]}"
stage "tests (side by side)" "$start"
