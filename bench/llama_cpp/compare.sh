#!/usr/bin/env bash
# bench/llama_cpp/compare.sh: our CPU engine against llama.cpp on the same weights, paired.
# Outside CI (the llama.cpp build takes minutes). Run with --help for what it does.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE="$ROOT/bench/llama_cpp"
WORK="$ROOT/build-llama"
TRACE_BUILD="$ROOT/build"
MODEL=""
NPM_VERSION="3.22.1"
PAIRS=5
THREADS=2
PREFILL=128
DECODE=32
REPEAT=3
LLAMA_ARGS=""
JSON=0
CHECK=1
SPEED=1
QUANT=""
PY=/usr/bin/python3
# A fixed token sequence for the fidelity check: ordinary text tokens of the Qwen vocabulary
# and a few from its upper range (the rows of the embedding that a short prompt rarely hits).
CHECK_TOKENS="9707,11,1879,0,576,3974,13876,38835,34208,916,279,15678,5562,13,151000,42,7,100,2048,77777,123456,5,64,9999"

usage() {
  cat <<EOF
Usage: bench/llama_cpp/compare.sh [OPTIONS]

Compares trace's CPU engine (canonical numerics, best ISA path) with llama.cpp on the same
weights, on this machine, in one run:
  prefill of $PREFILL tokens: ours vs llama.cpp with F32 weights  (target: ours >= 1.0x)
  decode at batch 1:        ours vs llama.cpp with BF16 weights (target: ours >= 0.9x;
                            the same bytes read: our preset weights are bf16)
  our prefill at N threads vs 1 thread                         (target: >= 1.8x)
Steps (each reused when already done, with a progress line):
  1. llama.cpp source: npm installs node-llama-cpp@$NPM_VERSION (--ignore-scripts: no binary is
     downloaded or compiled) into WORK/npm and clones its llama/gitRelease.bundle (a git bundle)
     into WORK/llama.cpp.
  2. Builds llama.cpp's llama-bench and libllama (CPU only, GGML_NATIVE, Release, -j2) and
     bench/llama_cpp/llama_logits.cc against them.
  3. Writes the qwen2.5-0.5b preset (seed 1) with 'trace model init' unless --model is given,
     and converts it to WORK/gguf/*-f32.gguf and *-bf16.gguf with hf_to_gguf.py (numpy and the
     bundle's gguf-py; llama.cpp's own converter needs torch).
  4. Fidelity: the logits after a fixed 24-token sequence, llama.cpp (bench/llama_cpp/
     llama_logits.cc: F32 KV cache, no flash attention, the first 23 tokens as one batch, the
     last alone) vs 'trace logits --all' (canonical): max |diff| over the vocabulary relative
     to the spread of our logits must be <= 1e-5 with F32 weights (measured: about 5e-7, the
     size of f32 reordering) and the argmax equal; <= 2e-2 with BF16 weights (measured: about
     3.5e-3; llama.cpp rounds activations to bf16 there). A RoPE theta of 1e4 instead of 1e6
     measures 0.23. A failed check stops the run: a speed comparison on a wrong model means
     nothing.
  5. Speed: --pairs pairs, alternating which side runs first (bench/llama_cpp/compare_speed.py);
     prints every pair, the median ratio ours/theirs with its spread, our ISA path, the load
     average and the targets.
With --quant TYPES (llama-quantize's names, e.g. Q8_0,Q4_K_M) the run is about quantized files
instead: llama.cpp's own llama-quantize makes WORK/gguf/*-TYPE.gguf from the F32 file (with
its fallbacks: a row that is not whole blocks of 256 becomes Q5_0, Q5_1 or Q8_0), the fidelity
check compares both engines on each file (max |diff| relative to the spread of our logits
<= 5e-2: llama.cpp quantizes the activations to 8 bits for its dot products, we keep them f32),
and the speed pairs run both engines on the very same file (bench/llama_cpp/compare_quant.py;
targets: decode >= 1.5x on Q8_0 and Q4_K_M, prefill >= 1.0x).

Options:
  --pairs N         pairs of measurements (default $PAIRS, at least 3 recommended)
  --threads N       threads for both engines (default $THREADS)
  --prefill N       prefill tokens (default $PREFILL)
  --decode N        decode steps at batch 1 (default $DECODE)
  --repeat N        repetitions inside each measurement, averaged (default $REPEAT)
  --llama-args STR  more llama-bench options for every llama-bench run, e.g. '--poll 0' (its
                    threads then sleep instead of spinning at barriers: on a loaded machine
                    spinning threads lose whole time slices); default: llama-bench's defaults
  --model DIR       a qwen2/qwen3 trace model folder (default: the qwen2.5-0.5b preset, seed 1)
  --work DIR        scratch folder for npm, llama.cpp, models and GGUFs (default build-llama/)
  --trace-build DIR trace's CMake build folder with bin/trace and bench/engine/engine_bench
                    (default build/; the two targets are built there if missing)
  --quant TYPES     compare on llama-quantize's files of these types instead (comma-separated)
  --check-only      stop after the fidelity check
  --skip-check      no fidelity check (only when it already passed on these GGUFs)
  --json            the speed result as one JSON object on stdout (progress stays on stderr)
  -h, --help        this help

Needs: npm, git, cmake, a C++ compiler, /usr/bin/python3 with numpy (python3-numpy from apt;
installed here under /tmp/apt.lock when running as root, else named as missing).
Example: bench/llama_cpp/compare.sh --pairs 5
EOF
}

die() {
  echo "compare: $*" >&2
  exit 1
}
need_value() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"; }
progress() { echo "compare: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --pairs) need_value "$@"; PAIRS=$2; shift 2 ;;
    --threads) need_value "$@"; THREADS=$2; shift 2 ;;
    --prefill) need_value "$@"; PREFILL=$2; shift 2 ;;
    --decode) need_value "$@"; DECODE=$2; shift 2 ;;
    --repeat) need_value "$@"; REPEAT=$2; shift 2 ;;
    --llama-args) need_value "$@"; LLAMA_ARGS=$2; shift 2 ;;
    --model) need_value "$@"; MODEL=$2; shift 2 ;;
    --work) need_value "$@"; WORK=$2; shift 2 ;;
    --trace-build) need_value "$@"; TRACE_BUILD=$2; shift 2 ;;
    --quant) need_value "$@"; QUANT=$2; shift 2 ;;
    --check-only) SPEED=0; shift ;;
    --skip-check) CHECK=0; shift ;;
    --json) JSON=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for n in PAIRS THREADS PREFILL DECODE REPEAT; do
  [[ "${!n}" =~ ^[1-9][0-9]*$ ]] || die "--${n,,} must be a positive integer, got '${!n}'"
done

# ---- prerequisites ----------------------------------------------------------------------
for tool in npm git cmake c++; do
  command -v "$tool" > /dev/null || die "'$tool' is not installed"
done
[[ -x "$PY" ]] || die "$PY is missing (install python3 and python3-numpy from apt)"
if ! "$PY" -c 'import numpy' 2> /dev/null; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get > /dev/null; then
    progress "installing python3-numpy (apt, under /tmp/apt.lock)"
    flock /tmp/apt.lock apt-get install -y -qq python3-numpy > /dev/null ||
      die "apt-get install python3-numpy failed"
  else
    die "numpy is missing for $PY: run 'apt-get install python3-numpy'"
  fi
fi
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

TRACE="$TRACE_BUILD/bin/trace"
ENGINE_BENCH="$TRACE_BUILD/bench/engine/engine_bench"
if [[ ! -x "$TRACE" || ! -x "$ENGINE_BENCH" ]]; then
  [[ -f "$TRACE_BUILD/CMakeCache.txt" ]] ||
    die "$TRACE_BUILD is not a configured CMake build of trace (see --trace-build)"
  progress "building trace and engine_bench in $TRACE_BUILD"
  cmake --build "$TRACE_BUILD" -j2 --target trace engine_bench > "$WORK/trace-build.log" 2>&1 ||
    die "building trace failed; see $WORK/trace-build.log"
fi

# ---- 1. the llama.cpp source ------------------------------------------------------------
LLAMA_SRC="$WORK/llama.cpp"
if [[ ! -f "$LLAMA_SRC/CMakeLists.txt" ]]; then
  BUNDLE="$WORK/npm/node_modules/node-llama-cpp/llama/gitRelease.bundle"
  if [[ ! -f "$BUNDLE" ]]; then
    progress "npm install node-llama-cpp@$NPM_VERSION (scripts off, no binaries) into $WORK/npm"
    mkdir -p "$WORK/npm"
    npm install --prefix "$WORK/npm" --ignore-scripts --omit=optional --no-audit --no-fund \
      --no-save "node-llama-cpp@$NPM_VERSION" > "$WORK/npm.log" 2>&1 ||
      die "npm install failed; see $WORK/npm.log"
    [[ -f "$BUNDLE" ]] || die "node-llama-cpp@$NPM_VERSION has no llama/gitRelease.bundle"
  fi
  progress "cloning the llama.cpp bundle into $LLAMA_SRC"
  rm -rf "$LLAMA_SRC"
  git clone -q "$BUNDLE" "$LLAMA_SRC" 2> "$WORK/clone.log" || die "git clone of $BUNDLE failed"
fi
LLAMA_INFO="$WORK/npm/node_modules/node-llama-cpp/llama/llama.cpp.info.json"
LLAMA_TAG=$([[ -f "$LLAMA_INFO" ]] && "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["tag"])' "$LLAMA_INFO" || echo unknown)

# ---- 2. build llama-bench, libllama and llama_logits ------------------------------------
LLAMA_BUILD="$LLAMA_SRC/build"
LLAMA_BENCH="$LLAMA_BUILD/bin/llama-bench"
LOGITS="$WORK/llama_logits"
if [[ ! -x "$LLAMA_BENCH" ]]; then
  progress "building llama.cpp's llama-bench (CPU, GGML_NATIVE, Release, -j2: several minutes); log $WORK/llama-build.log"
  launcher=()
  command -v ccache > /dev/null &&
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$LLAMA_SRC" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF "${launcher[@]}" > "$WORK/llama-build.log" 2>&1 ||
    die "configuring llama.cpp failed; see $WORK/llama-build.log"
  cmake --build "$LLAMA_BUILD" -j2 --target llama-bench llama >> "$WORK/llama-build.log" 2>&1 ||
    die "building llama-bench failed; see $WORK/llama-build.log"
fi
LLAMA_QUANTIZE="$LLAMA_BUILD/bin/llama-quantize"
if [[ -n "$QUANT" && ! -x "$LLAMA_QUANTIZE" ]]; then
  progress "building llama.cpp's llama-quantize; log $WORK/llama-build.log"
  cmake --build "$LLAMA_BUILD" -j2 --target llama-quantize >> "$WORK/llama-build.log" 2>&1 ||
    die "building llama-quantize failed; see $WORK/llama-build.log"
fi
if [[ ! -x "$LOGITS" || "$HERE/llama_logits.cc" -nt "$LOGITS" ]]; then
  progress "building llama_logits against libllama"
  mapfile -t libs < <(find "$LLAMA_BUILD/src" "$LLAMA_BUILD/ggml" -name '*.a' | sort)
  [[ ${#libs[@]} -gt 0 ]] || die "no static libraries under $LLAMA_BUILD (build it with BUILD_SHARED_LIBS=OFF)"
  c++ -std=c++17 -O2 -I"$LLAMA_SRC/include" -I"$LLAMA_SRC/ggml/include" "$HERE/llama_logits.cc" \
    -Wl,--start-group "${libs[@]}" -Wl,--end-group -fopenmp -lpthread -ldl -lm -o "$LOGITS" ||
    die "compiling llama_logits failed"
fi

# ---- 3. the model and its GGUFs ---------------------------------------------------------
if [[ -z "$MODEL" ]]; then
  MODEL="$WORK/models/qwen2.5-0.5b-seed1"
  if [[ ! -f "$MODEL/config.json" ]]; then
    progress "writing the qwen2.5-0.5b preset (seed 1) to $MODEL"
    rm -rf "$MODEL"
    "$TRACE" model init --preset qwen2.5-0.5b --seed 1 "$MODEL" > /dev/null || die "trace model init failed"
  fi
fi
[[ -f "$MODEL/config.json" ]] || die "--model $MODEL: no config.json"
MODEL=$(cd "$MODEL" && pwd)
GGUF_DIR="$WORK/gguf"
mkdir -p "$GGUF_DIR"
name=$(basename "$MODEL")
for dtype in f32 bf16; do
  out="$GGUF_DIR/$name-$dtype.gguf"
  if [[ ! -f "$out" || "$MODEL/config.json" -nt "$out" || "$HERE/hf_to_gguf.py" -nt "$out" ]]; then
    progress "converting $MODEL to $out"
    "$PY" "$HERE/hf_to_gguf.py" --gguf-py "$LLAMA_SRC/gguf-py" --dtype "$dtype" "$MODEL" "$out.tmp" ||
      die "conversion to $dtype failed"
    mv "$out.tmp" "$out"
  fi
done
F32="$GGUF_DIR/$name-f32.gguf"
BF16="$GGUF_DIR/$name-bf16.gguf"
QUANT_FILES=()
IFS=, read -r -a quant_types <<< "$QUANT"
for qtype in "${quant_types[@]}"; do
  [[ "$qtype" =~ ^[A-Za-z0-9_]+$ ]] || die "--quant: '$qtype' is not a llama-quantize type name"
  out="$GGUF_DIR/$name-$qtype.gguf"
  if [[ ! -f "$out" || "$F32" -nt "$out" ]]; then
    progress "quantizing $F32 to $qtype with llama-quantize"
    "$LLAMA_QUANTIZE" "$F32" "$out.tmp" "$qtype" "$THREADS" > "$WORK/quantize-$qtype.log" 2>&1 ||
      die "llama-quantize to $qtype failed; see $WORK/quantize-$qtype.log"
    mv "$out.tmp" "$out"
  fi
  QUANT_FILES+=("$qtype=$out")
done

# ---- 4. fidelity --------------------------------------------------------------------------
if [[ $CHECK -eq 1 && -n "$QUANT" ]]; then
  ok=1
  for spec in "${QUANT_FILES[@]}"; do
    qtype=${spec%%=*}
    gguf=${spec#*=}
    progress "fidelity on $qtype: logits after $(tr -cd , <<< "$CHECK_TOKENS" | wc -c)+1 tokens, llama.cpp vs trace on $gguf"
    "$TRACE" logits --model "$gguf" --tokens "$CHECK_TOKENS" --all --json --numerics canonical \
      --threads "$THREADS" > "$WORK/logits-trace-$qtype.json" || die "trace logits on $gguf failed"
    "$LOGITS" "$gguf" "$CHECK_TOKENS" "$THREADS" > "$WORK/logits-llama-$qtype.txt" ||
      die "llama_logits on $gguf failed"
    "$PY" "$HERE/check_logits.py" --label "llama.cpp $qtype" --tolerance 5e-2 \
      "$WORK/logits-trace-$qtype.json" "$WORK/logits-llama-$qtype.txt" >&2 || ok=0
  done
  [[ $ok -eq 1 ]] || die "the engines disagree on a quantized file (above); no speed comparison"
elif [[ $CHECK -eq 1 ]]; then
  progress "fidelity: logits after $(tr -cd , <<< "$CHECK_TOKENS" | wc -c)+1 tokens, llama.cpp vs trace (canonical)"
  "$TRACE" logits --model "$MODEL" --tokens "$CHECK_TOKENS" --all --json --numerics canonical \
    --threads "$THREADS" > "$WORK/logits-trace.json" || die "trace logits failed"
  ok=1
  for dtype in f32 bf16; do
    gguf="$GGUF_DIR/$name-$dtype.gguf"
    "$LOGITS" "$gguf" "$CHECK_TOKENS" "$THREADS" > "$WORK/logits-llama-$dtype.txt" ||
      die "llama_logits on $gguf failed"
    if [[ $dtype == f32 ]]; then
      tol=(--tolerance 1e-5 --require-argmax)
    else
      tol=(--tolerance 2e-2)
    fi
    "$PY" "$HERE/check_logits.py" --label "llama.cpp $dtype" "${tol[@]}" \
      "$WORK/logits-trace.json" "$WORK/logits-llama-$dtype.txt" >&2 || ok=0
  done
  [[ $ok -eq 1 ]] || die "the GGUF conversion is not faithful (above); no speed comparison"
fi
[[ $SPEED -eq 1 ]] || exit 0

# ---- 5. speed, paired -------------------------------------------------------------------
progress "llama.cpp from node-llama-cpp $NPM_VERSION (bundle tag $LLAMA_TAG); model $MODEL"
json=()
[[ $JSON -eq 1 ]] && json=(--json)
if [[ -n "$QUANT" ]]; then
  files=()
  for spec in "${QUANT_FILES[@]}"; do files+=(--gguf "$spec"); done
  exec "$PY" "$HERE/compare_quant.py" --engine-bench "$ENGINE_BENCH" --llama-bench "$LLAMA_BENCH" \
    "${files[@]}" --pairs "$PAIRS" --threads "$THREADS" --prefill "$PREFILL" --decode "$DECODE" \
    --repeat "$REPEAT" --llama-args "$LLAMA_ARGS" "${json[@]}"
fi
exec "$PY" "$HERE/compare_speed.py" --engine-bench "$ENGINE_BENCH" --model "$MODEL" \
  --llama-bench "$LLAMA_BENCH" --f32 "$F32" --bf16 "$BF16" --pairs "$PAIRS" \
  --threads "$THREADS" --prefill "$PREFILL" --decode "$DECODE" --repeat "$REPEAT" \
  --llama-args "$LLAMA_ARGS" "${json[@]}"
