// The mixture-of-experts kernels of the CUDA engine (docs/numerics.md "MoE routing"):
// launches and block bodies, host-callable. kernels/cuda/moe.cu runs them through
// DeviceBlock; tests/kernels/cuda_schedule_test.cc runs them over simulated grids and
// compares every bit with the CPU reference (kernels/cpu/ref_moe.cc, kernels::MatMul).
//
// A layer on the device, with no host round trip (so the pass stays one CUDA graph):
//   1. MoeRouteBlock: one thread per row, canonical::RouteRow (softmax, top-k, ids
//      ascending, optional renormalisation), exactly the CPU reference's function.
//      Fast numerics add MoeRankBlock + MoeCapacityBlock: the capacity-limited routing of
//      kernels::MoeRoute (first choices of all rows first, in row order; overflow dropped).
//   2. MoeGroupBlock: one block groups the pass's (row, slot) pairs by expert: per expert
//      its count, the exclusive scan (thread 0, in expert order) and the slots of each
//      expert in ascending slot order, written to `order` (unused tail: -1). The same
//      grouping as CpuOps::MoeExperts; it only decides which block computes which slot.
//   3. MoeExpertGemvBlock: block y = a position p in that order, slot s = order[p], its
//      expert e = ids[s]: the canonical GEMV body (schedule/gemv.h, one row) of x's row for
//      s against expert e's weights. Consecutive blocks share an expert, so its weights stay
//      in L2. Every output is the canonical dot of one row: the CPU's grouped MatMul bits.
//   4. MoeCombineBlock: one thread per output element, the k slots in ascending expert id
//      from +0 by canonical::CombineStep (dropped slots skipped); MoeAddSharedBlock adds
//      qwen2_moe's shared expert term (canonical::SharedExpertWeight) after it.
//
// Ownership: pointers are the caller's (device memory on the GPU, host memory in tests).
// Thread safety: a body writes only its own outputs. Errors: none.
#pragma once

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/cuda/schedule/gemv.h"
#include "kernels/cuda/schedule/launch.h"
#include "kernels/cuda/schedule/memory.h"

namespace trace::kernels::cuda::schedule {

// ---- 1. routing: one thread per row --------------------------------------------------------
struct MoeRouteArgs {
  const float* logits = nullptr;  // [M, E] router logits
  int64_t M = 0, E = 0, k = 0;
  bool normalize = false;
  float* probs = nullptr;    // [M, E] scratch
  int32_t* ids = nullptr;    // [M, k]
  float* weights = nullptr;  // [M, k]
};
template <class Ex>
TRACE_HD void MoeRouteBlock(Ex& ex, uint32_t block_x, const MoeRouteArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t m = ElementIndex(block_x, tid);
    if (m >= a.M) return;
    canonical::RouteRow(a.logits + m * a.E, a.E, a.k, a.normalize, a.probs + m * a.E,
                        a.ids + m * a.k, a.weights + m * a.k);
  });
}

// Fast numerics only. rank[m * k + j]: the rank of slot j among its row's k choices by
// (weight desc, id asc), computed before any drop (the order kernels::MoeRoute sorts by).
struct MoeCapacityArgs {
  int32_t* ids = nullptr;    // [M, k], in place: dropped slots get -1
  float* weights = nullptr;  // [M, k], in place: dropped slots get 0
  int64_t M = 0, E = 0, k = 0;
  int32_t* rank = nullptr;  // [M, k] scratch
  int32_t* load = nullptr;  // [E] scratch
};
template <class Ex>
TRACE_HD void MoeRankBlock(Ex& ex, uint32_t block_x, const MoeCapacityArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t s = ElementIndex(block_x, tid);
    if (s >= a.M * a.k) return;
    const int64_t row = s / a.k * a.k;
    int32_t r = 0;
    for (int64_t j = 0; j < a.k; ++j) {
      if (row + j != s &&
          canonical::RanksBefore(a.weights[row + j], a.ids[row + j], a.weights[s], a.ids[s])) {
        ++r;
      }
    }
    a.rank[s] = r;
  });
}
// One thread (a serial pass, as on the CPU): capacity ceil(M * k / E) per expert, rank 0 of
// every row first, in row order, then rank 1, ...
template <class Ex>
TRACE_HD void MoeCapacityBlock(Ex& ex, const MoeCapacityArgs& a) {
  ex.ForEachThread([&](int tid) {
    if (tid != 0) return;
    const int64_t capacity = (a.M * a.k + a.E - 1) / a.E;
    for (int64_t e = 0; e < a.E; ++e) a.load[e] = 0;
    for (int64_t r = 0; r < a.k; ++r) {
      for (int64_t m = 0; m < a.M; ++m) {
        for (int64_t j = 0; j < a.k; ++j) {
          const int64_t s = m * a.k + j;
          if (a.rank[s] != r) continue;
          if (a.load[a.ids[s]]++ >= capacity) {
            a.ids[s] = -1;
            a.weights[s] = 0.0f;
          }
        }
      }
    }
  });
}

// ---- 2. grouping by expert: one block ------------------------------------------------------
inline constexpr int kMoeGroupThreads = 256;
struct MoeGroupArgs {
  const int32_t* ids = nullptr;  // [slots]: expert per (row, slot); -1 dropped
  int64_t slots = 0, E = 0;
  int32_t* offsets = nullptr;  // [E + 1]: expert e's positions are offsets[e] .. offsets[e+1]
  int32_t* order = nullptr;    // [slots]: slot at each position, grouped; tail -1
};
TRACE_HD LaunchDims MoeGroupLaunch() {
  LaunchDims d;
  d.block = kMoeGroupThreads;
  return d;
}
template <class Ex>
TRACE_HD void MoeGroupBlock(Ex& ex, const MoeGroupArgs& a) {
  // The offsets are what the block's threads share (global memory, one block).
  auto offsets = ex.Shared(a.offsets, a.E + 1, "moe_group.offsets");
  ex.ForEachThread([&](int tid) {  // counts
    for (int64_t e = tid; e < a.E; e += ex.threads()) {
      int32_t n = 0;
      for (int64_t s = 0; s < a.slots; ++s) n += a.ids[s] == e;
      offsets[e + 1] = n;
    }
  });
  ex.Barrier();
  ex.ForEachThread([&](int tid) {  // exclusive scan in expert order
    if (tid != 0) return;
    offsets[0] = 0;
    for (int64_t e = 0; e < a.E; ++e) offsets[e + 1] += offsets[e];
  });
  ex.Barrier();
  ex.ForEachThread([&](int tid) {  // each expert's slots, ascending; then the unused tail
    for (int64_t e = tid; e < a.E; e += ex.threads()) {
      int32_t p = offsets[e];
      for (int64_t s = 0; s < a.slots; ++s) {
        if (a.ids[s] == e) a.order[p++] = static_cast<int32_t>(s);
      }
    }
    for (int64_t p = offsets[a.E] + tid; p < a.slots; p += ex.threads()) a.order[p] = -1;
  });
}

// ---- 3. the experts' matrices: block y = a position in expert order -------------------------
struct MoeExpertGemvArgs {
  const float* x = nullptr;              // the rows read: slot s reads row s / x_per_row of [*, K]
  int64_t x_per_row = 1;                 // k when x is the layer input (one row per token), else 1
  const int32_t* order = nullptr;        // [slots] (MoeGroupBlock)
  const int32_t* ids = nullptr;          // [slots]
  const void* const* weights = nullptr;  // [E]: each expert's [N, K] matrix, row-major
  int64_t N = 0, K = 0;
  float* y = nullptr;      // [slots, N]
  bool vector_ok = false;  // GemvVectorOk for every expert's matrix and x's rows
};
TRACE_HD LaunchDims MoeExpertGemvLaunch(int64_t slots, int64_t N) {
  LaunchDims d = GemvLaunch(N);
  d.grid_y = static_cast<uint32_t>(slots);
  return d;
}
template <DType D, class Ex>
TRACE_HD void MoeExpertGemvBlock(Ex& ex, uint32_t block_x, uint32_t block_y,
                                 const MoeExpertGemvArgs& a) {
  const int32_t s = a.order[block_y];  // uniform across the block
  if (s < 0) return;
  GemvArgs g;
  g.x = a.x + (s / a.x_per_row) * a.K;
  g.M = 1;
  g.w = a.weights[a.ids[s]];
  g.N = a.N;
  g.K = a.K;
  g.y = a.y + static_cast<int64_t>(s) * a.N;
  g.vector_ok = a.vector_ok;
  GemvBlock<D, 1>(ex, block_x, g);
}

// ---- 4. combine, and the shared expert's term: one thread per output element -------------
struct MoeCombineArgs {
  const float* expert_out = nullptr;  // [M, k, n]
  const int32_t* ids = nullptr;       // [M, k]
  const float* weights = nullptr;     // [M, k]
  int64_t M = 0, k = 0, n = 0;
  float* out = nullptr;  // [M, n]; must not alias expert_out
};
template <class Ex>
TRACE_HD void MoeCombineBlock(Ex& ex, uint32_t block_x, const MoeCombineArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t idx = ElementIndex(block_x, tid);
    if (idx >= a.M * a.n) return;
    const int64_t m = idx / a.n, i = idx % a.n;
    float acc = 0.0f;
    for (int64_t j = 0; j < a.k; ++j) {
      if (a.ids[m * a.k + j] < 0) continue;  // dropped by capacity (fast only)
      acc = canonical::CombineStep(acc, a.weights[m * a.k + j],
                                   a.expert_out[(m * a.k + j) * a.n + i]);
    }
    a.out[idx] = acc;
  });
}

struct MoeAddSharedArgs {
  const float* shared_out = nullptr;   // [M, n]
  const float* gate_logits = nullptr;  // [M]
  int64_t M = 0, n = 0;
  float* out = nullptr;  // [M, n], in place
};
template <class Ex>
TRACE_HD void MoeAddSharedBlock(Ex& ex, uint32_t block_x, const MoeAddSharedArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t idx = ElementIndex(block_x, tid);
    if (idx >= a.M * a.n) return;
    const float w = canonical::SharedExpertWeight(a.gate_logits[idx / a.n]);
    a.out[idx] = canonical::CombineStep(a.out[idx], w, a.shared_out[idx]);
  });
}

}  // namespace trace::kernels::cuda::schedule
