// NEON canonical MatMul: vectorised across output columns, one register holding one lane's
// accumulators for 4 columns; each (lane, column) chain is the contract's sequential fma over
// its blocks in increasing k, then the 32 lanes fold left to right (canonical::ChainStep /
// FoldLanes / AddBias of kernels/canonical.h with neon::Arith). Equals ref::MatMulCanonical
// bit for bit for every M, column range and thread count.
//   decode (M = 1) on kInterleaved32 weights (the engine's layout): a group of 32 columns in
//     8 registers, one sequential stream of the weights (Q8_0: int8 -> f32 times the row's
//     scale, the exact weight);
//   otherwise: 8-column panels, read in place from kInterleaved32 bf16/f16/f32 weights or
//     packed as f32 (row-major weights, Q8_0), against up to 6 rows of x at a time.
// Fast numerics runs the reference on this path (it promises no bits across machines).
// Shapes: x [M, K], w [N, K], y [M, N]; a column range [n_begin, n_end) from the dispatch.
// Check: tests/arm64/check.sh (KernelsMatMul under qemu).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/neon_common.h"

namespace trace::kernels::neon {
namespace {

constexpr int kRowsPerMicroTile = 6;

template <DType D>
using WeightT = std::conditional_t<D == DType::kF32, float, uint16_t>;

// Weights of a panel of 4 * C columns, element (k, 4c + i) at panel[k * stride + 4c + i].
template <DType PD, int C>
struct PanelLoader {
  const void* panel;
  int64_t stride;
  void Begin(int64_t /*block*/) {}
  void Load(int64_t k, float32x4_t w[C]) const {
    for (int c = 0; c < C; ++c) w[c] = LoadWeights4<PD>(panel, k * stride + 4 * c);
  }
};

// Columns c0 .. c0 + 4C - 1 of one group of kInterleaved32 Q8_0 rows (c0 % 8 == 0): per
// block, the rows' f32 scales, then the int8 values as [k % 32][row % 32] (kernels.h).
template <int C>
struct Q8Loader {
  static_assert(C % 2 == 0, "int8 values are read 8 columns at a time");
  Q8Loader(const uint8_t* group_, int c0_) : group(group_), c0(c0_) {}
  const uint8_t* group;
  int c0;
  const uint8_t* block = nullptr;
  float32x4_t scale[C] = {};
  void Begin(int64_t b) {
    block = group + b * kQ8_0Interleaved32BlockBytes;
    const auto* scales = reinterpret_cast<const float*>(block);
    for (int c = 0; c < C; ++c) scale[c] = vld1q_f32(scales + c0 + 4 * c);
  }
  void Load(int64_t k, float32x4_t w[C]) const {
    const int8_t* q = reinterpret_cast<const int8_t*>(block + 128 + (k % 32) * 32 + c0);
    for (int c = 0; c < C; c += 2) {
      const int16x8_t q16 = vmovl_s8(vld1_s8(q + 4 * c));
      w[c] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q16))), scale[c]);
      w[c + 1] = vmulq_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(q16))), scale[c + 1]);
    }
  }
};

// y[r, 0 .. ncols) for R rows of x (row r at x + r * K) against 4 * C columns of weights:
// R * C accumulators in registers, the 32 lanes' values in memory between blocks.
template <int R, int C, class Loader>
void MicroTile(const float* x, int64_t K, Loader load, const float* bias, int64_t ncols, float* y,
               int64_t ldy) {
  float32x4_t lanes[32][R][C];
  for (auto& lane : lanes) {
    for (auto& row : lane) {
      for (auto& v : row) v = vdupq_n_f32(0.0f);
    }
  }
  const int64_t n_blocks = (K + 31) / 32;
  for (int64_t b = 0; b < n_blocks; ++b) {
    load.Begin(b);
    float32x4_t acc[R][C];
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) acc[r][c] = lanes[canonical::LaneOfBlock(b)][r][c];
    }
    const int64_t k_end = canonical::BlockEnd(b, K);
    for (int64_t k = canonical::BlockBegin(b); k < k_end; ++k) {
      float32x4_t w[C];
      load.Load(k, w);
      for (int r = 0; r < R; ++r) {
        const float32x4_t xv = vdupq_n_f32(x[r * K + k]);
        for (int c = 0; c < C; ++c) acc[r][c] = canonical::ChainStep<Arith>(acc[r][c], xv, w[c]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) lanes[canonical::LaneOfBlock(b)][r][c] = acc[r][c];
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(16) float sum[4 * C];
    for (int c = 0; c < C; ++c) {
      vst1q_f32(sum + 4 * c, canonical::FoldLanes<Arith>(&lanes[0][r][c], R * C));
    }
    for (int64_t c = 0; c < ncols; ++c) {
      y[r * ldy + c] = bias != nullptr ? canonical::AddBias(sum[c], bias[c]) : sum[c];
    }
  }
}

// MicroTile for `rows` (1 .. kRowsPerMicroTile) rows of x.
template <int C, class Loader>
void RunRows(int rows, const float* x, int64_t K, const Loader& load, const float* bias,
             int64_t ncols, float* y, int64_t ldy) {
  switch (rows) {
    case 1:
      return MicroTile<1, C>(x, K, load, bias, ncols, y, ldy);
    case 2:
      return MicroTile<2, C>(x, K, load, bias, ncols, y, ldy);
    case 3:
      return MicroTile<3, C>(x, K, load, bias, ncols, y, ldy);
    case 4:
      return MicroTile<4, C>(x, K, load, bias, ncols, y, ldy);
    case 5:
      return MicroTile<5, C>(x, K, load, bias, ncols, y, ldy);
    default:
      return MicroTile<6, C>(x, K, load, bias, ncols, y, ldy);
  }
}

// panel[k * 8 + c] = f32(w[n0 + c, k]) for c < ncols, 0 for the missing columns.
void PackPanel(const WeightView& w, int64_t n0, int64_t ncols, float* panel) {
  const int64_t K = w.cols;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(K));
  std::fill(panel, panel + K * 8, 0.0f);
  for (int64_t c = 0; c < ncols; ++c) {
    WeightRowToF32(w, n0 + c, K, row.data());
    for (int64_t k = 0; k < K; ++k) panel[k * 8 + c] = row[static_cast<size_t>(k)];
  }
}

// Rows m of x against columns [n_begin, n_end) through 8-column loaders from make(n0).
template <class MakeLoader>
void Panels(const float* x, int64_t M, int64_t K, int64_t N, const float* bias, float* y,
            int64_t n_begin, int64_t n_end, MakeLoader make) {
  for (int64_t n0 = n_begin; n0 < n_end; n0 += 8) {
    const int64_t ncols = std::min<int64_t>(8, n_end - n0);
    const auto load = make(n0, ncols);
    const float* bias_n = bias != nullptr ? bias + n0 : nullptr;
    for (int64_t m = 0; m < M; m += kRowsPerMicroTile) {
      const int rows = static_cast<int>(std::min<int64_t>(kRowsPerMicroTile, M - m));
      RunRows<2>(rows, x + m * K, K, load, bias_n, ncols, y + m * N + n0, N);
    }
  }
}

// kInterleaved32 bf16 / f16 / f32 weights, read in place.
template <DType D>
void CanonicalInterleaved(const float* x, int64_t M, const WeightView& w, const float* bias,
                          float* y, int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  const auto* base = static_cast<const WeightT<D>*>(w.data);
  // n_begin is a multiple of 32 (the dispatch's split); a group's padding rows are zero.
  if (M == 1) {
    for (int64_t n0 = n_begin; n0 < n_end; n0 += 32) {
      MicroTile<1, 8>(x, K, PanelLoader<D, 8>{base + n0 * K, 32},
                      bias != nullptr ? bias + n0 : nullptr, std::min<int64_t>(32, n_end - n0),
                      y + n0, w.rows);
    }
    return;
  }
  Panels(x, M, K, w.rows, bias, y, n_begin, n_end, [&](int64_t n0, int64_t) {
    return PanelLoader<D, 2>{base + (n0 / 32) * K * 32 + n0 % 32, 32};
  });
}

void CanonicalInterleavedQ8(const float* x, int64_t M, const WeightView& w, const float* bias,
                            float* y, int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  const int64_t group_bytes = K / kQ8_0BlockElems * kQ8_0Interleaved32BlockBytes;
  const auto* base = static_cast<const uint8_t*>(w.data);
  if (M == 1) {
    for (int64_t n0 = n_begin; n0 < n_end; n0 += 32) {
      MicroTile<1, 8>(x, K, Q8Loader<8>{base + n0 / 32 * group_bytes, 0},
                      bias != nullptr ? bias + n0 : nullptr, std::min<int64_t>(32, n_end - n0),
                      y + n0, w.rows);
    }
    return;
  }
  Panels(x, M, K, w.rows, bias, y, n_begin, n_end, [&](int64_t n0, int64_t) {
    return Q8Loader<2>{base + n0 / 32 * group_bytes, static_cast<int>(n0 % 32)};
  });
}

// Row-major weights of any type: 8 columns at a time packed as an f32 panel.
void CanonicalPacked(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  thread_local std::vector<float> panel;
  panel.resize(static_cast<size_t>(K * 8));
  Panels(x, M, K, w.rows, bias, y, n_begin, n_end, [&](int64_t n0, int64_t ncols) {
    PackPanel(w, n0, ncols, panel.data());
    return PanelLoader<DType::kF32, 2>{panel.data(), 8};
  });
}

}  // namespace

void MatMulCanonical(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end) {
  if (w.layout != WeightLayout::kInterleaved32) {
    return CanonicalPacked(x, M, w, bias, y, n_begin, n_end);
  }
  if (IsQuantized(w.dtype)) return CanonicalInterleavedQ8(x, M, w, bias, y, n_begin, n_end);
  WithDType(w.dtype, [&](auto d) {
    CanonicalInterleaved<decltype(d)::value>(x, M, w, bias, y, n_begin, n_end);
  });
}

}  // namespace trace::kernels::neon
