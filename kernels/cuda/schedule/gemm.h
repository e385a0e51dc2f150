// The canonical tiled GEMM (MatMul for M > 8, prefill): tile choice, launch and the whole
// block body, host-callable. kernels/cuda/matmul.cu launches GemmKernel, which runs GemmBlock
// through DeviceBlock; tests/kernels/cuda_schedule_test.cc runs GemmBlock over a simulated
// grid and compares every output bit with the CPU reference.
//
// Work decomposition: a block computes a BM x BN tile of y (grid x over N, grid y over M);
// thread (ty, tx) owns TM x TN outputs. K is walked one canonical lane slice at a time:
// slice l visits the K blocks l, l+32, l+64, ... (lane l's blocks, kernels/canonical.h); each
// 32-element block is staged in shared memory ([k][m] and [k][n]) and every thread
// fma-chains its outputs over the block's elements in increasing k into the slice partial;
// when slice l is complete it is folded into the running total (total = part for l = 0,
// else total + part): the canonical left fold, one lane at a time. There is no split-K and
// M only changes which thread computes an element, never its order.
//
// Ownership: pointers are the caller's; `xs`/`ws` are the block's shared tiles.
// Thread safety: a block writes only its own tile. Errors: none.
#pragma once

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/cuda/schedule/launch.h"
#include "kernels/cuda/schedule/memory.h"

namespace trace::kernels::cuda::schedule {

template <int BM_, int BN_, int TM_, int TN_>
struct GemmTile {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_;
  static constexpr int kThreads = (BM / TM) * (BN / TN);
  // The depth of a staged K tile: one canonical block, so that a tile is one lane's run of
  // consecutive elements (any other depth changes which lane an element belongs to).
  static constexpr int kDepth = canonical::kBlockLen;
  static constexpr int kPad = 4;  // keeps shared rows 16-byte aligned for 4-float reads
  static constexpr int kXsStride = BM + kPad;
  static constexpr int kWsStride = BN + kPad;
  static constexpr int kXsFloats = kDepth * kXsStride;  // shared [k][m]
  static constexpr int kWsFloats = kDepth * kWsStride;  // shared [k][n]
};
using GemmTile128x128 = GemmTile<128, 128, 8, 8>;
using GemmTile64x64 = GemmTile<64, 64, 4, 4>;
using GemmTile64x32 = GemmTile<64, 32, 4, 4>;

enum class GemmTileKind { k128x128, k64x64, k64x32 };

// The largest tile that still gives every SM a block (else the smallest). The tile only
// changes which thread computes an element, never the element's order.
TRACE_HD GemmTileKind ChooseGemmTile(int64_t M, int64_t N, int sm_count) {
  auto tiles = [&](int64_t bm, int64_t bn) {
    return static_cast<int64_t>(CeilDiv(M, bm)) * CeilDiv(N, bn);
  };
  if (tiles(128, 128) >= sm_count) return GemmTileKind::k128x128;
  if (tiles(64, 64) >= sm_count) return GemmTileKind::k64x64;
  return GemmTileKind::k64x32;
}

template <class Tile>
TRACE_HD LaunchDims GemmLaunch(int64_t M, int64_t N) {
  LaunchDims d;
  d.grid_x = CeilDiv(N, Tile::BN);
  d.grid_y = CeilDiv(M, Tile::BM);
  d.block = Tile::kThreads;
  return d;
}

struct GemmArgs {
  const float* x = nullptr;  // [M, K]
  int64_t M = 0;
  const void* w = nullptr;  // [N, K] row-major
  int64_t N = 0, K = 0;
  const float* bias = nullptr;  // [N] or null
  float* y = nullptr;           // [M, N]
};

// Thread `tid` stages its share of K block `b` of the tile's x rows and w rows into shared
// memory, transposed to [k][m] and [k][n]; past the block's end (or the matrix edge) it
// writes zeros, which the accumulation never reads.
template <class Tile, DType D, class P>
TRACE_HD void GemmStage(const GemmArgs& a, uint32_t block_x, uint32_t block_y, int64_t b, int tid,
                        P xs, P ws) {
  const int64_t m_base = static_cast<int64_t>(block_y) * Tile::BM;
  const int64_t n_base = static_cast<int64_t>(block_x) * Tile::BN;
  const int64_t k0 = b * Tile::kDepth;
  const int count = static_cast<int>((k0 + Tile::kDepth < a.K ? k0 + Tile::kDepth : a.K) - k0);
  for (int e = tid; e < Tile::BM * Tile::kDepth; e += Tile::kThreads) {
    const int r = e / Tile::kDepth;
    const int kk = e % Tile::kDepth;
    const int64_t m = m_base + r;
    xs[kk * Tile::kXsStride + r] = (m < a.M && kk < count) ? LoadRO(a.x + m * a.K + k0 + kk) : 0.0f;
  }
  for (int e = tid; e < Tile::BN * Tile::kDepth; e += Tile::kThreads) {
    const int r = e / Tile::kDepth;
    const int kk = e % Tile::kDepth;
    const int64_t n = n_base + r;
    ws[kk * Tile::kWsStride + r] =
        (n < a.N && kk < count) ? LoadWeight<D>(a.w, n * a.K + k0 + kk) : 0.0f;
  }
}

// Thread `tid`'s chains over the `count` staged elements (only those: no zero padding is
// ever added), in increasing k.
template <class Tile, class P>
TRACE_HD void GemmAccumulate(P xs, P ws, int tid, int count, float (&part)[Tile::TM][Tile::TN]) {
  const int tx = tid % (Tile::BN / Tile::TN);
  const int ty = tid / (Tile::BN / Tile::TN);
  for (int kk = 0; kk < count; ++kk) {
    float av[Tile::TM];
    float bv[Tile::TN];
    TRACE_UNROLL
    for (int i = 0; i < Tile::TM; i += 4)
      LoadShared4(xs + kk * Tile::kXsStride + ty * Tile::TM + i, av + i);
    TRACE_UNROLL
    for (int j = 0; j < Tile::TN; j += 4)
      LoadShared4(ws + kk * Tile::kWsStride + tx * Tile::TN + j, bv + j);
    TRACE_UNROLL
    for (int i = 0; i < Tile::TM; ++i) {
      TRACE_UNROLL
      for (int j = 0; j < Tile::TN; ++j)
        part[i][j] = canonical::ChainStep(part[i][j], av[i], bv[j]);
    }
  }
}

template <class Tile>
struct GemmThreadState {
  float total[Tile::TM][Tile::TN];
  float part[Tile::TM][Tile::TN];
};

template <class Tile, DType D, class Ex>
TRACE_HD void GemmBlock(Ex& ex, uint32_t block_x, uint32_t block_y, const GemmArgs& a,
                        float* xs_memory, float* ws_memory) {
  auto xs = ex.Shared(xs_memory, Tile::kXsFloats, "gemm.xs");
  auto ws = ex.Shared(ws_memory, Tile::kWsFloats, "gemm.ws");
  typename Ex::template Local<GemmThreadState<Tile>> st(ex);
  const int64_t nblocks = (a.K + Tile::kDepth - 1) / Tile::kDepth;
  for (int slice = 0; slice < canonical::kLanes; ++slice) {
    ex.ForEachThread([&](int tid) {
      TRACE_UNROLL
      for (int i = 0; i < Tile::TM; ++i) {
        TRACE_UNROLL
        for (int j = 0; j < Tile::TN; ++j) st[tid].part[i][j] = 0.0f;
      }
    });
    for (int64_t b = slice; b < nblocks; b += canonical::kLanes) {
      const int64_t k0 = b * Tile::kDepth;
      const int count = static_cast<int>((k0 + Tile::kDepth < a.K ? k0 + Tile::kDepth : a.K) - k0);
      ex.ForEachThread([&](int tid) { GemmStage<Tile, D>(a, block_x, block_y, b, tid, xs, ws); });
      ex.Barrier();
      ex.ForEachThread([&](int tid) { GemmAccumulate<Tile>(xs, ws, tid, count, st[tid].part); });
      ex.Barrier();
    }
    // Slice `slice` is complete: the left fold's next step.
    ex.ForEachThread([&](int tid) {
      TRACE_UNROLL
      for (int i = 0; i < Tile::TM; ++i) {
        TRACE_UNROLL
        for (int j = 0; j < Tile::TN; ++j) {
          st[tid].total[i][j] = slice == 0
                                    ? st[tid].part[i][j]
                                    : canonical::FoldStep(st[tid].total[i][j], st[tid].part[i][j]);
        }
      }
    });
  }
  ex.ForEachThread([&](int tid) {
    const int tx = tid % (Tile::BN / Tile::TN);
    const int ty = tid / (Tile::BN / Tile::TN);
    TRACE_UNROLL
    for (int i = 0; i < Tile::TM; ++i) {
      const int64_t m = static_cast<int64_t>(block_y) * Tile::BM + ty * Tile::TM + i;
      if (m >= a.M) continue;
      TRACE_UNROLL
      for (int j = 0; j < Tile::TN; ++j) {
        const int64_t n = static_cast<int64_t>(block_x) * Tile::BN + tx * Tile::TN + j;
        if (n >= a.N) continue;
        const float v = st[tid].total[i][j];
        a.y[m * a.N + n] = a.bias != nullptr ? canonical::AddBias(v, LoadRO(a.bias + n)) : v;
      }
    }
  });
}

}  // namespace trace::kernels::cuda::schedule
