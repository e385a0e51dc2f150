// The canonical attention kernel: launch and whole block body, host-callable.
// kernels/cuda/attention.cu launches CanonicalAttentionKernel, which runs AttentionBlock
// through DeviceBlock; tests/kernels/cuda_schedule_test.cc runs the same body over a
// simulated grid and compares every output bit with the CPU reference.
//
// Work decomposition: one block of 256 threads per (head h = block_x, query row r = block_y).
//   1. Scores: thread t computes s_j = Dot(q_h, k_j) * scale for positions j = t, t+256, ...
//      (each dot serially in the contract's order) into the row's scratch p[], and the max
//      of its positions (MaxStep); the 256 partial maxima go to shared memory.
//   2. Every thread combines the 256 partial maxima (MaxStep; any order is exact) and applies
//      the NaN rule (MaxFinish with p[0]); after a barrier (thread 0 would otherwise overwrite
//      p[0] while others read it) thread t turns its positions into Exp(s_j - max).
//   3. The sum over positions: warp 0, lane l owns the position blocks l, l+32, ...; the warp
//      gathers its 32 partials and folds them in lane order.
//   4. The weighted sum of V: for every (lane l, element d), l < 32, d < head_dim, spread over
//      the threads, the lane partial over positions of p_j * v_j[d] into shared memory.
//   5. Element d: the fold of its 32 lane partials in lane order, divided by the sum.
// Two passes, no online rescaling: a position gets the same bits in prefill and decode.
//
// Ownership: pointers are the caller's; `shared` is the block's dynamic shared memory
// (AttentionSharedFloats). Thread safety: a block writes only its row's scratch and output.
// Errors: none.
#pragma once

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/cuda/schedule/launch.h"
#include "kernels/cuda/schedule/memory.h"

namespace trace::kernels::cuda::schedule {

inline constexpr int kAttentionThreads = 256;

struct AttentionArgs {
  const float* q = nullptr;  // [rows, heads, head_dim]
  // Row r's cache and position: from the arrays when k_caches is set (a batched forward),
  // else k0 / v0 / pos0 for every row.
  const float* const* k_caches = nullptr;  // [rows]
  const float* const* v_caches = nullptr;
  const int32_t* positions = nullptr;
  const float* k0 = nullptr;
  const float* v0 = nullptr;
  int64_t pos0 = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 0.0f;          // canonical::AttentionScale(the model's attention_scale_dim)
  int64_t window = 0;          // > 0: a sliding layer's row sees its last `window` positions
  float* scratch = nullptr;    // [rows, heads, scratch_stride]: scores, then probabilities
  int64_t scratch_stride = 0;  // > the largest position
  float* out = nullptr;        // [rows, heads, head_dim]
};

// Shared floats of one block: 32 x head_dim lane partials, 256 partial maxima, the sum.
TRACE_HD int64_t AttentionSharedFloats(int64_t head_dim) {
  return canonical::kLanes * head_dim + kAttentionThreads + 1;
}

TRACE_HD LaunchDims AttentionLaunch(int64_t rows, int64_t heads, int64_t head_dim) {
  LaunchDims d;
  d.grid_x = static_cast<uint32_t>(heads);
  d.grid_y = static_cast<uint32_t>(rows);
  d.block = kAttentionThreads;
  d.shared_bytes = sizeof(float) * static_cast<size_t>(AttentionSharedFloats(head_dim));
  return d;
}

// Row r's cache from its first visible position on, and its position relative to that
// (a sliding window is attention over the window's rows: kernels::Attention's contract).
struct AttentionRowCache {
  const float* k;
  const float* v;
  int64_t pos;
};
TRACE_HD AttentionRowCache RowCache(const AttentionArgs& a, int64_t r) {
  const float* k = a.k_caches != nullptr ? a.k_caches[r] : a.k0;
  const float* v = a.v_caches != nullptr ? a.v_caches[r] : a.v0;
  const int64_t pos = a.positions != nullptr ? a.positions[r] : a.pos0;
  const int64_t first = a.window > 0 && pos >= a.window ? pos - a.window + 1 : 0;
  const int64_t kv_stride = a.kv_heads * a.head_dim;
  return {k + first * kv_stride, v + first * kv_stride, pos - first};
}

template <class Ex>
TRACE_HD void AttentionBlock(Ex& ex, uint32_t block_x, uint32_t block_y, const AttentionArgs& a,
                             float* shared) {
  const int64_t h = block_x;
  const int64_t r = block_y;
  const AttentionRowCache row = RowCache(a, r);
  const float* k_cache = row.k;
  const float* v_cache = row.v;
  const int64_t n_pos = row.pos + 1;
  const int64_t d = a.head_dim;
  const int64_t kvh = h / (a.heads / a.kv_heads);
  const int64_t kv_stride = a.kv_heads * d;
  const float* qh = a.q + (r * a.heads + h) * d;
  const float* kh = k_cache + kvh * d;
  const float* vh = v_cache + kvh * d;
  // What the block's threads share: the scores row (global scratch) and shared memory.
  auto p = ex.Shared(a.scratch + (r * a.heads + h) * a.scratch_stride, n_pos, "attention.scores");
  auto partials = ex.Shared(shared, canonical::kLanes * d, "attention.partials");  // [kLanes][d]
  auto maxima = ex.Shared(shared + canonical::kLanes * d, kAttentionThreads, "attention.maxima");
  auto sum = ex.Shared(shared + canonical::kLanes * d + kAttentionThreads, 1, "attention.sum");
  const int threads = ex.threads();

  // 1. Scores and each thread's maximum.
  ex.ForEachThread([&](int tid) {
    float mx = canonical::MaxStart();
    for (int64_t j = tid; j < n_pos; j += threads) {
      const float s = canonical::ScaleScore(canonical::Dot(qh, kh + j * kv_stride, d), a.scale);
      p[j] = s;
      mx = canonical::MaxStep(mx, s);
    }
    maxima[tid] = mx;
  });
  ex.Barrier();  // publishes p[] and maxima[] to the block
  // 2. The row's maximum (every thread reads the first score for the NaN rule, so no thread
  // may overwrite it before the barrier), then the probabilities.
  typename Ex::template Local<float> row_max(ex);
  ex.ForEachThread([&](int tid) {
    float mx = canonical::MaxStart();
    for (int t = 0; t < threads; ++t) mx = canonical::MaxStep(mx, maxima[t]);
    row_max[tid] = canonical::MaxFinish(mx, p[0]);
  });
  ex.Barrier();
  ex.ForEachThread([&](int tid) {
    for (int64_t j = tid; j < n_pos; j += threads)
      p[j] = canonical::Probability(p[j], row_max[tid]);
  });
  ex.Barrier();
  // 3. The sum over positions: warp 0.
  typename Ex::template Local<float> lane_sum(ex);
  ex.ForEachThread([&](int tid) {
    if (tid < canonical::kLanes) lane_sum[tid] = canonical::LanePartialSum(p, n_pos, tid);
  });
  ex.ForEachThread([&](int tid) {
    if (tid >= canonical::kLanes) return;  // warp 0 only, all of its lanes
    float lanes[canonical::kLanes];
    ex.WarpGather(
        tid, [&](int t) { return lane_sum[t]; }, lanes);
    if (tid == 0) *sum = canonical::FoldLanes(lanes);
  });
  // 4. Lane partials of the weighted sum of V.
  ex.ForEachThread([&](int tid) {
    for (int64_t idx = tid; idx < canonical::kLanes * d; idx += threads) {
      const int lane = static_cast<int>(idx / d);
      const int64_t e = idx % d;
      partials[lane * d + e] = canonical::LanePartialDot(p, vh + e, n_pos, lane, 1, kv_stride);
    }
  });
  ex.Barrier();  // publishes partials[] and the sum
  // 5. Fold and normalise.
  float* oh = a.out + (r * a.heads + h) * d;
  ex.ForEachThread([&](int tid) {
    for (int64_t e = tid; e < d; e += threads) {
      oh[e] = canonical::Normalize(canonical::FoldLanes(partials + e, d), *sum);
    }
  });
}

}  // namespace trace::kernels::cuda::schedule
