// The elementwise canonical kernels (Rope, SiluMul, GeluTanhMul, Add, Exp, Embedding) and the
// engine's row moves (K/V cache scatter, gather of output rows): launches and block bodies,
// host-callable. kernels/cuda/*.cu and engine/cuda/kv_ops.cu run them through DeviceBlock;
// the CPU tests over a simulated grid.
//
// Work decomposition: one thread per output element (Rope: per (row, head, i < d/2) pair);
// each element is the scalar reference's expression from kernels/canonical.h. Row moves:
// grid y over rows, threads over the row's width; they copy values and compute nothing.
//
// Ownership: pointers are the caller's. Thread safety: disjoint outputs per thread.
// Errors: none.
#pragma once

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/cuda/schedule/launch.h"
#include "kernels/cuda/schedule/memory.h"

namespace trace::kernels::cuda::schedule {

// ---- Rope: x [M, heads, d] in place; one thread per (m, h, i < d/2) ----------------------
struct RopeArgs {
  float* x = nullptr;
  int64_t M = 0, heads = 0, head_dim = 0;
  const int32_t* positions = nullptr;  // [M]
  const float* cos_table = nullptr;    // [max_pos, d/2] (kernels::MakeRopeTables)
  const float* sin_table = nullptr;
};
TRACE_HD int64_t RopePairs(const RopeArgs& a) {
  return a.M * a.heads * (a.head_dim / 2);
}
template <class Ex>
TRACE_HD void RopeBlock(Ex& ex, uint32_t block_x, const RopeArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t idx = ElementIndex(block_x, tid);
    if (idx >= RopePairs(a)) return;
    const int64_t half = a.head_dim / 2;
    const int64_t i = idx % half;
    const int64_t mh = idx / half;  // m * heads + h
    const int64_t table = static_cast<int64_t>(a.positions[mh / a.heads]) * half + i;
    float* v = a.x + mh * a.head_dim;
    canonical::RopeRotate(v[i], v[i + half], LoadRO(a.cos_table + table),
                          LoadRO(a.sin_table + table), &v[i], &v[i + half]);
  });
}

// ---- SiluMul, GeluTanhMul, Add, Exp: one thread per element
// --------------------------------------------
struct BinaryArgs {
  const float* a = nullptr;
  const float* b = nullptr;  // unused by Exp
  int64_t n = 0;
  float* out = nullptr;  // may alias a (or b)
};
template <class Ex>
TRACE_HD void SiluMulBlock(Ex& ex, uint32_t block_x, const BinaryArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t i = ElementIndex(block_x, tid);
    if (i < a.n) a.out[i] = canonical::SiluMul(a.a[i], a.b[i]);
  });
}
template <class Ex>
TRACE_HD void GeluTanhMulBlock(Ex& ex, uint32_t block_x, const BinaryArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t i = ElementIndex(block_x, tid);
    if (i < a.n) a.out[i] = canonical::GeluTanhMul(a.a[i], a.b[i]);
  });
}
template <class Ex>
TRACE_HD void AddBlock(Ex& ex, uint32_t block_x, const BinaryArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t i = ElementIndex(block_x, tid);
    if (i < a.n) a.out[i] = canonical::Add(a.a[i], a.b[i]);
  });
}
template <class Ex>
TRACE_HD void ExpBlock(Ex& ex, uint32_t block_x, const BinaryArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t i = ElementIndex(block_x, tid);
    if (i < a.n) a.out[i] = canonical::Exp(a.a[i]);
  });
}

// ---- Embedding: out[m, c] = f32(table[ids[m], c]); grid (columns / 256, M) ------------------
struct EmbeddingArgs {
  const void* table = nullptr;  // [vocab, cols] in the kernel's dtype
  int64_t cols = 0;
  const int32_t* ids = nullptr;  // [M]
  int64_t M = 0;
  float* out = nullptr;  // [M, cols]
  float scale = 1.0f;    // not 1: one rounded multiply (Gemma's sqrt(hidden))
};
TRACE_HD LaunchDims EmbeddingLaunch(int64_t M, int64_t cols) {
  LaunchDims d = ElementwiseLaunch(cols);
  d.grid_y = static_cast<uint32_t>(M);
  return d;
}
template <DType D, class Ex>
TRACE_HD void EmbeddingBlock(Ex& ex, uint32_t block_x, uint32_t block_y, const EmbeddingArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t m = block_y;
    const int64_t c = ElementIndex(block_x, tid);
    if (m >= a.M || c >= a.cols) return;
    const float w = LoadWeight<D>(a.table, static_cast<int64_t>(a.ids[m]) * a.cols + c);
    a.out[m * a.cols + c] = a.scale != 1.0f ? canonical::Mul(w, a.scale) : w;
  });
}

// ---- row moves of the engine ---------------------------------------------------------------
// Column blocks of a row move: at most 16 blocks of 256 threads, striding over the row.
TRACE_HD LaunchDims RowMoveLaunch(int64_t rows, int64_t width) {
  LaunchDims d;
  const int64_t blocks = (width + kElementwiseThreads - 1) / kElementwiseThreads;
  d.grid_x = static_cast<uint32_t>(blocks < 16 ? blocks : 16);
  d.grid_y = static_cast<uint32_t>(rows);
  d.block = kElementwiseThreads;
  return d;
}
// dst_rows[r] + positions[r] * width receives src + r * width (appending K/V rows).
struct ScatterRowsArgs {
  const float* src = nullptr;
  int64_t width = 0;
  float* const* dst_rows = nullptr;
  const int32_t* positions = nullptr;
};
template <class Ex>
TRACE_HD void ScatterRowsBlock(Ex& ex, uint32_t block_x, uint32_t block_y, uint32_t grid_x,
                               const ScatterRowsArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t r = block_y;
    float* dst = a.dst_rows[r] + static_cast<int64_t>(a.positions[r]) * a.width;
    for (int64_t i = ElementIndex(block_x, tid); i < a.width;
         i += static_cast<int64_t>(grid_x) * kElementwiseThreads) {
      dst[i] = a.src[r * a.width + i];
    }
  });
}
// dst + i * width receives src + index[i] * width (the rows whose logits were asked for).
struct GatherRowsArgs {
  const float* src = nullptr;
  const int32_t* index = nullptr;
  int64_t width = 0;
  float* dst = nullptr;
};
template <class Ex>
TRACE_HD void GatherRowsBlock(Ex& ex, uint32_t block_x, uint32_t block_y, uint32_t grid_x,
                              const GatherRowsArgs& a) {
  ex.ForEachThread([&](int tid) {
    const int64_t i = block_y;
    const float* row = a.src + static_cast<int64_t>(a.index[i]) * a.width;
    for (int64_t c = ElementIndex(block_x, tid); c < a.width;
         c += static_cast<int64_t>(grid_x) * kElementwiseThreads) {
      a.dst[i * a.width + c] = row[c];
    }
  });
}

}  // namespace trace::kernels::cuda::schedule
