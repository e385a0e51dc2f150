// The canonical RmsNorm kernel: launch and whole block body, host-callable.
// kernels/cuda/rms_norm.cu runs RmsNormBlock through DeviceBlock; the CPU tests run it over
// a simulated grid.
//
// Work decomposition: one warp per row (4 warps per 128-thread block, row
// m = block_x * 4 + warp). Lane l is canonical lane l: it chains x_i * x_i over the blocks
// l, l+32, ... of the row; the warp gathers the 32 partials and every lane folds them in lane
// order, computes inv = 1 / sqrt(sum_sq / n + eps) and writes out[i] = (x[i] * inv) * w[i] for
// i = l, l+32, .... out may alias x: every lane has read its blocks before the gather, and
// writes only after it.
//
// Ownership: pointers are the caller's. Thread safety: a block writes only its rows.
// Errors: none.
#pragma once

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/cuda/schedule/launch.h"
#include "kernels/cuda/schedule/memory.h"

namespace trace::kernels::cuda::schedule {

inline constexpr int kRmsNormWarpsPerBlock = 4;
inline constexpr int kRmsNormThreads = kRmsNormWarpsPerBlock * canonical::kLanes;

struct RmsNormArgs {
  const float* x = nullptr;  // [M, n]
  int64_t M = 0, n = 0;
  const void* weight = nullptr;  // [n] in the kernel's dtype
  float eps = 0.0f;
  float* out = nullptr;  // [M, n], may alias x
};

TRACE_HD LaunchDims RmsNormLaunch(int64_t M) {
  LaunchDims d;
  d.grid_x = CeilDiv(M, kRmsNormWarpsPerBlock);
  d.block = kRmsNormThreads;
  return d;
}

template <DType D, class Ex>
TRACE_HD void RmsNormBlock(Ex& ex, uint32_t block_x, const RmsNormArgs& a) {
  typename Ex::template Local<float> partial(ex);
  auto row_of = [&](int tid) {
    return (static_cast<int64_t>(block_x) * kRmsNormThreads + tid) / canonical::kLanes;
  };
  ex.ForEachThread([&](int tid) {
    const int64_t m = row_of(tid);
    if (m >= a.M) return;  // the whole warp
    const float* xr = a.x + m * a.n;
    partial[tid] = canonical::LanePartialDot(xr, xr, a.n, tid % canonical::kLanes);
  });
  ex.ForEachThread([&](int tid) {
    const int64_t m = row_of(tid);
    if (m >= a.M) return;
    float lanes[canonical::kLanes];
    ex.WarpGather(
        tid, [&](int t) { return partial[t]; }, lanes);
    const float inv = canonical::RmsInverse(canonical::FoldLanes(lanes), a.n, a.eps);
    const float* xr = a.x + m * a.n;
    float* orow = a.out + m * a.n;
    for (int64_t i = tid % canonical::kLanes; i < a.n; i += canonical::kLanes) {
      orow[i] = canonical::RmsScale(xr[i], inv, LoadWeight<D>(a.weight, i));
    }
  });
}

}  // namespace trace::kernels::cuda::schedule
