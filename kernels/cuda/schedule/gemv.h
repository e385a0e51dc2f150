// The canonical GEMV (MatMul for M <= 8, decode): its launch and its whole block body,
// host-callable. kernels/cuda/matmul.cu launches GemvKernel, which runs GemvBlock through
// DeviceBlock; tests/kernels/cuda_schedule_test.cc runs the same GemvBlock over a simulated
// grid and compares every output bit with the CPU reference.
//
// Work decomposition: one warp per output row n (4 warps per 128-thread block, row
// n = block_x * 4 + warp); lane l of the warp is canonical lane l and owns the K blocks
// l, l+32, l+64, ... (kernels/canonical.h); it fma-chains up to MT = min(M, 8) activation
// rows against each weight block it loads, so a batch of 8 reads the weights once. The warp
// then gathers its 32 lane partials and folds them in lane order, and lane 0 adds the bias
// and stores y[m, n]. M > 8 rows run in passes of 8.
//
// Ownership: pointers are the caller's (device memory on the GPU, host memory in tests).
// Thread safety: a body writes only its own outputs. Errors: none.
#pragma once

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/cuda/schedule/launch.h"
#include "kernels/cuda/schedule/memory.h"

namespace trace::kernels::cuda::schedule {

inline constexpr int kGemvWarpsPerBlock = 4;
inline constexpr int kGemvThreads = kGemvWarpsPerBlock * canonical::kLanes;
inline constexpr int kGemvMaxRows = 8;  // activation rows per weight load (MT)

struct GemvArgs {
  const float* x = nullptr;  // [M, K]
  int64_t M = 0;
  const void* w = nullptr;  // [N, K] in the kernel's dtype, row-major
  int64_t N = 0, K = 0;
  const float* bias = nullptr;  // [N] or null
  float* y = nullptr;           // [M, N]
  bool vector_ok = false;       // GemvVectorOk: every row start 16-byte aligned
};

TRACE_HD LaunchDims GemvLaunch(int64_t N) {
  LaunchDims d;
  d.grid_x = CeilDiv(N, kGemvWarpsPerBlock);
  d.block = kGemvThreads;
  return d;
}
// The MT template argument the launcher picks for M rows.
TRACE_HD int GemvRowsPerPass(int64_t M) {
  return M < kGemvMaxRows ? static_cast<int>(M) : kGemvMaxRows;
}
// 16-byte loads need every row start of x and w 16-byte aligned.
inline bool GemvVectorOk(const float* x, const void* w, int64_t K, DType dtype) {
  const int64_t elem = dtype == DType::kF32 ? 4 : 2;
  return reinterpret_cast<uintptr_t>(w) % 16 == 0 && (K * elem) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && K % 4 == 0;
}

TRACE_HD int64_t GemvRow(uint32_t block_x, int tid) {
  return (static_cast<int64_t>(block_x) * kGemvThreads + tid) / canonical::kLanes;
}
TRACE_HD int GemvLane(int tid) {
  return tid % canonical::kLanes;
}

// Lane `lane`'s chains for activation rows m0 .. m0 + mcount - 1 against weight row n.
template <DType D, int MT>
TRACE_HD void GemvLanePartials(const GemvArgs& a, int64_t n, int lane, int64_t m0, int mcount,
                               float (&acc)[MT]) {
  TRACE_UNROLL
  for (int m = 0; m < MT; ++m) acc[m] = 0.0f;
  const void* row = static_cast<const char*>(a.w) + n * a.K * kElementBytes<D>;
  const int64_t nblocks = canonical::NumBlocks(a.K);
  for (int64_t b = lane; b < nblocks; b += canonical::kLanes) {
    const int64_t k0 = canonical::BlockBegin(b);
    const int count = static_cast<int>(canonical::BlockEnd(b, a.K) - k0);
    if (a.vector_ok && count == canonical::kBlockLen) {
      float w[canonical::kBlockLen];
      LoadBlock32<D>(row, k0, w);
      TRACE_UNROLL
      for (int m = 0; m < MT; ++m) {
        if (m >= mcount) continue;
        float xv[canonical::kBlockLen];
        LoadActivations32(a.x + (m0 + m) * a.K + k0, xv);
        TRACE_UNROLL
        for (int i = 0; i < canonical::kBlockLen; ++i) {
          acc[m] = canonical::ChainStep(acc[m], xv[i], w[i]);
        }
      }
    } else {  // a short last block or unaligned rows: element by element, the same order
      for (int i = 0; i < count; ++i) {
        const float wk = LoadWeight<D>(row, k0 + i);
        TRACE_UNROLL
        for (int m = 0; m < MT; ++m) {
          if (m < mcount)
            acc[m] = canonical::ChainStep(acc[m], LoadRO(a.x + (m0 + m) * a.K + k0 + i), wk);
        }
      }
    }
  }
}

// y[m, n] from the warp's 32 lane partials: the fold in lane order, then the bias.
TRACE_HD float GemvOutput(const float (&lanes)[canonical::kLanes], const float* bias, int64_t n) {
  const float dot = canonical::FoldLanes(lanes);
  return bias != nullptr ? canonical::AddBias(dot, LoadRO(bias + n)) : dot;
}

template <DType D, int MT, class Ex>
TRACE_HD void GemvBlock(Ex& ex, uint32_t block_x, const GemvArgs& a) {
  struct Partials {
    float acc[MT];
  };
  typename Ex::template Local<Partials> st(ex);
  for (int64_t m0 = 0; m0 < a.M; m0 += MT) {
    const int mcount = static_cast<int>(a.M - m0 < MT ? a.M - m0 : MT);
    ex.ForEachThread([&](int tid) {
      const int64_t n = GemvRow(block_x, tid);
      if (n >= a.N) return;  // the whole warp: n is uniform per warp
      GemvLanePartials<D, MT>(a, n, GemvLane(tid), m0, mcount, st[tid].acc);
    });
    ex.ForEachThread([&](int tid) {
      const int64_t n = GemvRow(block_x, tid);
      if (n >= a.N) return;
      TRACE_UNROLL
      for (int m = 0; m < MT; ++m) {
        float lanes[canonical::kLanes];
        ex.WarpGather(
            tid, [&](int t) { return st[t].acc[m]; }, lanes);
        if (GemvLane(tid) == 0 && m < mcount)
          a.y[(m0 + m) * a.N + n] = GemvOutput(lanes, a.bias, n);
      }
    });
  }
}

}  // namespace trace::kernels::cuda::schedule
