#!/usr/bin/env bash
# The mutation check of the CUDA numerics (docs/cuda.md, "Checked without a GPU"): applies
# deliberate order mistakes to the CUDA kernels' sources, one at a time, and shows that the
# CPU-only tests catch each. For every mistake it
#   1. edits a copy of the checkout (never this one),
#   2. compiles the affected .cu with nvcc (when nvcc is here) to show the mistake is a valid
#      CUDA program that would ship,
#   3. rebuilds and runs the CPU-only tests (cuda_schedule_test and cuda_moe_schedule_test:
#      the kernels' bodies over a simulated grid; kernels_test for the shared definitions),
#      which must FAIL.
# It prints one table and exits 0 when every mistake was caught (and the unmutated baseline
# passed), 1 otherwise. Not part of CI: it rebuilds for every mistake (about 1 minute each on
# 2 cores with ccache).
#
#   tests/gpu/mutation_check.sh [--no-nvcc] [--keep] [--only NAME]
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
USE_NVCC=1
KEEP=0
ONLY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-nvcc) USE_NVCC=0; shift ;;
    --keep) KEEP=1; shift ;;
    --only) ONLY="${2:?--only needs a mutation name}"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "mutation_check.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
command -v nvcc >/dev/null 2>&1 || USE_NVCC=0
WORK="$(mktemp -d /tmp/trace-mutation-XXXXXX)"
trap '[[ $KEEP == 1 ]] || rm -rf "$WORK"' EXIT
SRC="$WORK/src"
BUILD="$WORK/build"
LOG="$WORK/log"
mkdir -p "$SRC" "$LOG"

echo "mutation: copying the checkout (tracked and untracked files) to $SRC"
(cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$SRC"
ln -s "$ROOT/tools/js/node_modules" "$SRC/tools/js/node_modules" 2>/dev/null || true

echo "mutation: configuring a CPU-only build"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$WORK"  # relative paths: the next run's copy hits the same cache
fi
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRACE_CUDA=OFF -DTRACE_BUILD_BENCH=OFF -DTRACE_UI=OFF \
  -DTRACE_BUILD_FUZZ=OFF "${launcher[@]}" >"$LOG/configure.log" 2>&1 \
  || { echo "configure failed: $LOG/configure.log"; cat "$LOG/configure.log"; exit 1; }

# Runs the tests a mistake in `file` must fail; prints "caught: <first failure>" or "MISSED".
run_tests() {
  local tag="$1"
  if ! cmake --build "$BUILD" --target cuda_schedule_test cuda_moe_schedule_test kernels_test -j2 \
       >"$LOG/$tag.build.log" 2>&1; then
    echo "build failed: $(grep -m1 -E 'error' "$LOG/$tag.build.log" | cut -c1-120)"
    return 0
  fi
  local failed=""
  "$BUILD/tests/kernels/cuda_schedule_test" >"$LOG/$tag.schedule.log" 2>&1 || failed="cuda_schedule_test"
  "$BUILD/tests/kernels/cuda_moe_schedule_test" >"$LOG/$tag.moe.log" 2>&1 \
    || failed="${failed:+$failed, }cuda_moe_schedule_test"
  "$BUILD/tests/kernels/kernels_test" --gtest_filter='KernelsCanonical.*:KernelsDot.*:KernelsExp.*' \
    >"$LOG/$tag.kernels.log" 2>&1 || failed="${failed:+$failed, }kernels_test"
  if [[ -z "$failed" ]]; then
    echo "MISSED"
  else
    local first
    first=$(grep -h -m1 -E '^\[  FAILED  \] [A-Za-z]' "$LOG/$tag.schedule.log" "$LOG/$tag.moe.log" "$LOG/$tag.kernels.log" | head -1 | sed -e 's/^\[  FAILED  \] //' -e 's/ ([0-9]* ms)$//' | cut -c1-70)
    echo "caught by $failed (${first})"
  fi
}

# mutate NAME FILE CU_FILE DESCRIPTION OLD NEW: one mistake (python does an exact, unique
# replacement so that a stale pattern fails loudly instead of testing nothing).
declare -a NAMES
declare -A DESC FILEOF NVCC RESULT
mutate() {
  local name="$1" file="$2" cu="$3" desc="$4" old="$5" new="$6"
  [[ -n "$ONLY" && "$ONLY" != "$name" ]] && return
  NAMES+=("$name")
  DESC[$name]="$desc"
  FILEOF[$name]="$file"
  cp "$SRC/$file" "$WORK/original"
  if ! python3 - "$SRC/$file" "$old" "$new" <<'EOF'
import sys
path, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"pattern found {text.count(old)} times in {path}")
open(path, "w").write(text.replace(old, new))
EOF
  then
    NVCC[$name]="-"
    RESULT[$name]="STALE PATTERN (the script needs updating)"
    return
  fi
  NVCC[$name]="skipped"
  if [[ $USE_NVCC == 1 && -n "$cu" ]]; then
    if nvcc -std=c++17 -arch=sm_90 --fmad=false -O3 -I"$SRC" -c "$SRC/$cu" -o "$WORK/mutant.o" \
         >"$LOG/$name.nvcc.log" 2>&1; then
      NVCC[$name]="compiles"
    else
      NVCC[$name]="does not compile"
    fi
  fi
  echo "mutation: $name ($desc)"
  RESULT[$name]="$(run_tests "$name")"
  echo "   -> ${RESULT[$name]}"
  cp "$WORK/original" "$SRC/$file"
}

echo "mutation: baseline (no mistake)"
BASELINE="$(run_tests baseline)"
echo "   -> $([[ "$BASELINE" == MISSED ]] && echo "every test passes" || echo "$BASELINE")"

mutate gemv-tree-fold kernels/cuda/schedule/gemv.h kernels/cuda/matmul.cu \
  "GEMV folds the 32 lane partials as a pairwise tree" \
  '  const float dot = canonical::FoldLanes(lanes);' \
  '  float t[canonical::kLanes];
  for (int i = 0; i < canonical::kLanes; ++i) t[i] = lanes[i];
  for (int w = canonical::kLanes / 2; w > 0; w /= 2) {
    for (int i = 0; i < w; ++i) t[i] = canonical::Add(t[i], t[i + w]);
  }
  const float dot = t[0];'

mutate gemv-lane-swap kernels/cuda/schedule/gemv.h kernels/cuda/matmul.cu \
  "GEMV lane l takes the K blocks of lane l^1" \
  'for (int64_t b = lane; b < nblocks; b += canonical::kLanes) {' \
  'for (int64_t b = lane ^ 1; b < nblocks; b += canonical::kLanes) {'

mutate gemm-lane-swap kernels/cuda/schedule/gemm.h kernels/cuda/matmul.cu \
  "GEMM slice l walks the K blocks of lane l^1" \
  'for (int64_t b = slice; b < nblocks; b += canonical::kLanes) {' \
  'for (int64_t b = slice ^ 1; b < nblocks; b += canonical::kLanes) {'

mutate gemm-block-16 kernels/cuda/schedule/gemm.h kernels/cuda/matmul.cu \
  "GEMM stages K in 16-element tiles (block length 16)" \
  'static constexpr int kDepth = canonical::kBlockLen;' \
  'static constexpr int kDepth = 16;'

mutate gemm-bias-in-chain kernels/cuda/schedule/gemm.h kernels/cuda/matmul.cu \
  "GEMM starts slice 0 from the bias (fma-chained in) instead of adding it after the dot" \
  'for (int j = 0; j < Tile::TN; ++j) st[tid].part[i][j] = 0.0f;' \
  'for (int j = 0; j < Tile::TN; ++j) {
          const int64_t n = static_cast<int64_t>(block_x) * Tile::BN + (tid % (Tile::BN / Tile::TN)) * Tile::TN + j;
          st[tid].part[i][j] = slice == 0 && a.bias != nullptr && n < a.N ? a.bias[n] : 0.0f;
        }'

mutate rmsnorm-fma kernels/cuda/schedule/rms_norm.h kernels/cuda/rms_norm.cu \
  "RmsNorm computes sum_sq / n + eps as one fma with 1/n" \
  'const float inv = canonical::RmsInverse(canonical::FoldLanes(lanes), a.n, a.eps);' \
  'const float inv = canonical::Div(1.0f, canonical::Sqrt(canonical::Fma(
        canonical::FoldLanes(lanes), 1.0f / static_cast<float>(a.n), a.eps)));'

mutate rope-fma kernels/cuda/schedule/elementwise.h kernels/cuda/rope.cu \
  "RoPE fuses x1*c - x2*s into an fma" \
  '    canonical::RopeRotate(v[i], v[i + half], LoadRO(a.cos_table + table),
                          LoadRO(a.sin_table + table), &v[i], &v[i + half]);' \
  '    const float x1 = v[i], x2 = v[i + half];
    const float c = LoadRO(a.cos_table + table), s = LoadRO(a.sin_table + table);
    v[i] = canonical::Fma(x1, c, -canonical::Mul(x2, s));
    v[i + half] = canonical::Fma(x2, c, canonical::Mul(x1, s));'

mutate silu-libm-exp kernels/cuda/schedule/elementwise.h kernels/cuda/silu_mul.cu \
  "SiLU uses the math library's exp instead of the engine's Exp" \
  'if (i < a.n) a.out[i] = canonical::SiluMul(a.a[i], a.b[i]);' \
  'if (i < a.n) a.out[i] = canonical::Mul(canonical::Div(a.a[i], canonical::Add(1.0f, expf(-a.a[i]))), a.b[i]);'

mutate attention-sum-tree kernels/cuda/schedule/attention.h kernels/cuda/attention.cu \
  "attention folds the softmax sum's lanes as a pairwise tree" \
  '    if (tid == 0) *sum = canonical::FoldLanes(lanes);' \
  '    for (int w = canonical::kLanes / 2; w > 0; w /= 2) {
      for (int i = 0; i < w; ++i) lanes[i] = canonical::Add(lanes[i], lanes[i + w]);
    }
    if (tid == 0) *sum = lanes[0];'

mutate attention-v-lane-swap kernels/cuda/schedule/attention.h kernels/cuda/attention.cu \
  "attention puts lane l^1's partial of the weighted sum of V in slot l" \
  'canonical::LanePartialDot(p, vh + e, n_pos, lane, 1, kv_stride);' \
  'canonical::LanePartialDot(p, vh + e, n_pos, lane ^ 1, 1, kv_stride);'

mutate shared-fold-tree kernels/canonical.h kernels/cuda/matmul.cu \
  "the shared definition itself: canonical::FoldLanes as a pairwise tree (CPU and CUDA alike)" \
  '  typename A::V total = lanes[0];
  for (int l = 1; l < kLanes; ++l) total = FoldStep<A>(total, lanes[l * stride]);
  return total;' \
  '  typename A::V t[kLanes];
  for (int l = 0; l < kLanes; ++l) t[l] = lanes[l * stride];
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int l = 0; l < w; ++l) t[l] = A::Add(t[l], t[l + w]);
  }
  return t[0];'

mutate moe-combine-descending kernels/cuda/schedule/moe.h kernels/cuda/moe.cu \
  "MoE combine sums the k experts in descending expert id" \
  '    for (int64_t j = 0; j < a.k; ++j) {
      if (a.ids[m * a.k + j] < 0) continue;  // dropped by capacity (fast only)' \
  '    for (int64_t j = a.k - 1; j >= 0; --j) {
      if (a.ids[m * a.k + j] < 0) continue;  // dropped by capacity (fast only)'

mutate moe-shared-fma kernels/cuda/schedule/moe.h kernels/cuda/moe.cu \
  "MoE shared expert term fused into an fma with the routed sum" \
  'a.out[idx] = canonical::CombineStep(a.out[idx], w, a.shared_out[idx]);' \
  'a.out[idx] = canonical::Fma(w, a.shared_out[idx], a.out[idx]);'

mutate moe-expert-wrong-row kernels/cuda/schedule/moe.h kernels/cuda/moe.cu \
  "MoE expert GEMV reads slot s's activations from row s (not row s / k)" \
  'g.x = a.x + (s / a.x_per_row) * a.K;' \
  'g.x = a.x + (s / a.x_per_row + s % a.x_per_row) * a.K;'

# Races: each of these still computes the right bits on the host, phase after phase; on a GPU
# it is a race. The host block's race check (host_block.h) must name it.
mutate attention-barrier-removed kernels/cuda/schedule/attention.h kernels/cuda/attention.cu \
  "attention drops the barrier that publishes the scores and partial maxima (race)" \
  '  ex.Barrier();  // publishes p[] and maxima[] to the block' \
  ''

mutate attention-first-score-race kernels/cuda/schedule/attention.h kernels/cuda/attention.cu \
  "attention rewrites p[0] in the phase where every thread reads it for the NaN rule (race)" \
  '    row_max[tid] = canonical::MaxFinish(mx, p[0]);
  });
  ex.Barrier();
  ex.ForEachThread([&](int tid) {' \
  '    row_max[tid] = canonical::MaxFinish(mx, p[0]);
'

mutate gemm-barrier-removed kernels/cuda/schedule/gemm.h kernels/cuda/matmul.cu \
  "GEMM accumulates without waiting for the tiles to be staged (race)" \
  '      ex.ForEachThread([&](int tid) { GemmStage<Tile, D>(a, block_x, block_y, b, tid, xs, ws); });
      ex.Barrier();' \
  '      ex.ForEachThread([&](int tid) { GemmStage<Tile, D>(a, block_x, block_y, b, tid, xs, ws); });'

mutate rmsnorm-register-read kernels/cuda/schedule/rms_norm.h kernels/cuda/rms_norm.cu \
  "RmsNorm reads the warp's partials from the other threads' registers, not by a shuffle" \
  '    ex.WarpGather(
        tid, [&](int t) { return partial[t]; }, lanes);' \
  '    for (int l = 0; l < canonical::kLanes; ++l) {
      lanes[l] = partial[tid / canonical::kLanes * canonical::kLanes + l];
    }'

mutate moe-group-barrier-removed kernels/cuda/schedule/moe.h kernels/cuda/moe.cu \
  "MoE grouping scans the experts' counts before every thread has written its own (race)" \
  '  });
  ex.Barrier();
  ex.ForEachThread([&](int tid) {  // exclusive scan in expert order' \
  '  });
  ex.ForEachThread([&](int tid) {  // exclusive scan in expert order'

echo
echo "== mutation check ($(date -u +%Y-%m-%d), $(git -C "$ROOT" rev-parse --short=12 HEAD))"
echo "baseline (no mistake): $([[ "$BASELINE" == MISSED ]] && echo "every test passes" || echo "$BASELINE")"
printf '%-22s %-34s %-17s %s\n' "mistake" "file" "nvcc" "CPU-only tests"
status=0
[[ "$BASELINE" == MISSED ]] || status=1  # the unmutated tests must pass
for name in "${NAMES[@]}"; do
  printf '%-22s %-34s %-17s %s\n' "$name" "${FILEOF[$name]}" "${NVCC[$name]}" "${RESULT[$name]}"
  [[ "${RESULT[$name]}" == caught* ]] || status=1
done
echo
for name in "${NAMES[@]}"; do echo "  $name: ${DESC[$name]}"; done
[[ $KEEP == 1 ]] && echo "logs: $LOG"
exit $status
