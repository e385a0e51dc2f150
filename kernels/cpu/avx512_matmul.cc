// AVX-512 canonical MatMul. Vectorised across 32 output columns (two 16-wide registers),
// R <= 8 rows of x per micro-tile: every register element is one (row, column) lane chain of
// the contract, visited in increasing k (canonical::ChainStep with avx512::Arith), and the
// 32 lanes fold left to right (canonical::FoldStep, AddBias). So it equals
// ref::MatMulCanonical and avx2::MatMulCanonical bit for bit, for every M, column range and
// thread count; only the schedule differs:
// - Prefill (M > 1): a panel of 32 columns is packed once into f32 [K][32] (kInterleaved32
//   weights are converted in place when a single micro-tile of rows would use them) and
//   reused by every micro-tile of a block of rows (up to 4 MiB of x: one block per prefill
//   pass at the models' widths). The micro-tile runs
//   lane by lane (lane l's blocks l, l + 32, ... then its fold step), so it needs no array
//   of 32 partial sums: 2R accumulator registers and 2R running totals.
// - Decode (M == 1) on kInterleaved32 weights: 4 groups of 32 columns at once (8 independent
//   chains), each group one sequential stream read exactly once, with software prefetch.
// Fast numerics stays on avx2::MatMulFast (a conventional order; not part of this file).
// - Q8_0 weights: the same two schedules, the int8 values times their rows' scales (exact)
//   at the load: decode streams the quantized groups (1.125 bytes a weight), prefill packs
//   dequantized panels.
// - K-quants, Q4_1 and Q5_1 (kernels/kquant_interleaved.h): the same, each register of 16
//   rows' weights dequantized from their nibbles (and high-bit masks) by
//   canonical::KQuantAffineWeight / KQuantSymmetricWeight / AffineBlock32Weight, the block's
//   scales made once per block.
// Shapes: x [M, K], w [N, K] bf16|f16|f32|q8_0|q4_k|q5_k|q6_k|q4_1|q5_1, y [M, N]; a column range
// [n_begin, n_end) from the dispatch (n_begin a multiple of 32). Check: ctest -R 'KernelsMatMul'.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kquant_interleaved.h"

namespace trace::kernels::avx512 {
namespace {

constexpr int kPanelCols = 32;  // columns per panel: two registers, one interleaved group
constexpr int kMaxRows = 8;     // rows of x per micro-tile (2 * 8 accumulators + 2 * 8 totals)
constexpr int64_t kDecodePrefetchRows = 16;  // k rows ahead that the decode stream prefetches

template <DType D>
using WeightT = std::conditional_t<D == DType::kF32, float, uint16_t>;

// Masks of the live columns of a panel's two registers.
inline void ColumnMasks(int64_t ncols, __mmask16 mask[2]) {
  for (int c = 0; c < 2; ++c) {
    const int64_t live = std::clamp<int64_t>(ncols - 16 * c, 0, 16);
    mask[c] = static_cast<__mmask16>((1u << live) - 1u);
  }
}

// y[r, 0 .. ncols) for R rows of x (row stride K) against one panel: element (k, c) at
// panel[k * 32 + c] in dtype PD (a packed f32 panel, or kInterleaved32 weights in place).
template <DType PD, int R>
void MicroTile(const float* x, int64_t K, const void* panel, const float* bias, int64_t ncols,
               float* y, int64_t ldy) {
  __m512 total[R][2];
  const int64_t n_blocks = canonical::NumBlocks(K);
  for (int lane = 0; lane < canonical::kLanes; ++lane) {
    __m512 acc[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int64_t b = lane; b < n_blocks; b += canonical::kLanes) {
      const int64_t k_end = canonical::BlockEnd(b, K);
      for (int64_t k = canonical::BlockBegin(b); k < k_end; ++k) {
        const __m512 w0 = LoadWeights16<PD>(panel, k * kPanelCols);
        const __m512 w1 = LoadWeights16<PD>(panel, k * kPanelCols + 16);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512 xv = _mm512_set1_ps(x[r * K + k]);
          acc[r][0] = canonical::ChainStep<Arith>(acc[r][0], xv, w0);
          acc[r][1] = canonical::ChainStep<Arith>(acc[r][1], xv, w1);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < 2; ++c) {
        total[r][c] = lane == 0 ? acc[r][c] : canonical::FoldStep<Arith>(total[r][c], acc[r][c]);
      }
    }
  }
  __mmask16 mask[2];
  ColumnMasks(ncols, mask);
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < 2; ++c) {
      __m512 v = total[r][c];
      if (bias != nullptr) {
        v = canonical::AddBias<Arith>(v, _mm512_maskz_loadu_ps(mask[c], bias + 16 * c));
      }
      _mm512_mask_storeu_ps(y + r * ldy + 16 * c, mask[c], v);
    }
  }
}

template <DType PD>
void RunRows(int rows, const float* x, int64_t K, const void* panel, const float* bias,
             int64_t ncols, float* y, int64_t ldy) {
  switch (rows) {
    case 1:
      return MicroTile<PD, 1>(x, K, panel, bias, ncols, y, ldy);
    case 2:
      return MicroTile<PD, 2>(x, K, panel, bias, ncols, y, ldy);
    case 3:
      return MicroTile<PD, 3>(x, K, panel, bias, ncols, y, ldy);
    case 4:
      return MicroTile<PD, 4>(x, K, panel, bias, ncols, y, ldy);
    case 5:
      return MicroTile<PD, 5>(x, K, panel, bias, ncols, y, ldy);
    case 6:
      return MicroTile<PD, 6>(x, K, panel, bias, ncols, y, ldy);
    case 7:
      return MicroTile<PD, 7>(x, K, panel, bias, ncols, y, ldy);
    default:
      return MicroTile<PD, 8>(x, K, panel, bias, ncols, y, ldy);
  }
}

// Packs columns [n0, n0 + ncols) of `w` into f32 panel[k * 32 + c] (zeros past ncols).
template <DType D>
void PackPanel(const WeightView& w, int64_t n0, int64_t ncols, float* panel) {
  const int64_t K = w.cols;
  if (w.layout == WeightLayout::kInterleaved32) {
    // The group is already [K][32] (its missing columns are zero): convert in order.
    const auto* group = static_cast<const WeightT<D>*>(w.data) + n0 * K;
    for (int64_t k = 0; k < K; ++k) {
      _mm512_store_ps(panel + k * kPanelCols, LoadWeights16<D>(group, k * kPanelCols));
      _mm512_store_ps(panel + k * kPanelCols + 16, LoadWeights16<D>(group, k * kPanelCols + 16));
    }
    return;
  }
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(K));
  for (int64_t c = 0; c < kPanelCols; ++c) {
    if (c < ncols) {
      WeightRowToF32(w, n0 + c, K, row.data());
      for (int64_t k = 0; k < K; ++k) panel[k * kPanelCols + c] = row[k];
    } else {
      for (int64_t k = 0; k < K; ++k) panel[k * kPanelCols + c] = 0.0f;
    }
  }
}

// The end of a decode over G groups: each column's 32 lane values folded left to right, the
// bias added, the live columns stored.
template <int G>
void StoreDecodedGroups(const __m512 (&lanes)[canonical::kLanes][2 * G], const float* bias,
                        int64_t ncols, float* y) {
  for (int g = 0; g < G; ++g) {
    __mmask16 mask[2];
    ColumnMasks(ncols - g * kPanelCols, mask);
    for (int c = 0; c < 2; ++c) {
      __m512 sum = lanes[0][2 * g + c];
      for (int l = 1; l < canonical::kLanes; ++l) {
        sum = canonical::FoldStep<Arith>(sum, lanes[l][2 * g + c]);
      }
      const int64_t col = g * kPanelCols + 16 * c;
      if (bias != nullptr) {
        sum = canonical::AddBias<Arith>(sum, _mm512_maskz_loadu_ps(mask[c], bias + col));
      }
      _mm512_mask_storeu_ps(y + col, mask[c], sum);
    }
  }
}

// Decode: G groups of 32 kInterleaved32 columns (group g at groups + g * K * 32) against one
// row x. The 32 lanes' partial sums live in `lanes` (L1) so that every group is read in
// increasing k, once: a block at a time, its lane's 2G accumulators in registers.
template <DType D, int G>
void DecodeGroups(const float* x, int64_t K, const WeightT<D>* groups, const float* bias,
                  int64_t ncols, float* y) {
  constexpr int V = 2 * G;
  alignas(64) __m512 lanes[canonical::kLanes][V];
  for (auto& lane : lanes) {
    for (auto& v : lane) v = _mm512_setzero_ps();
  }
  const int64_t group_elems = K * kPanelCols;
  constexpr int64_t kLineElems = 64 / sizeof(WeightT<D>);
  const int64_t n_blocks = canonical::NumBlocks(K);
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512 acc[V];
    const int lane = canonical::LaneOfBlock(b);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = lanes[lane][v];
    const int64_t k_end = canonical::BlockEnd(b, K);
    for (int64_t k = canonical::BlockBegin(b); k < k_end; ++k) {
      const __m512 xv = _mm512_set1_ps(x[k]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const WeightT<D>* base = groups + g * group_elems + k * kPanelCols;
        for (int64_t e = 0; e < kPanelCols; e += kLineElems) {
          _mm_prefetch(reinterpret_cast<const char*>(base + kDecodePrefetchRows * kPanelCols + e),
                       _MM_HINT_T0);
        }
        acc[2 * g] = canonical::ChainStep<Arith>(acc[2 * g], xv, LoadWeights16<D>(base, 0));
        acc[2 * g + 1] =
            canonical::ChainStep<Arith>(acc[2 * g + 1], xv, LoadWeights16<D>(base, 16));
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) lanes[lane][v] = acc[v];
  }
  StoreDecodedGroups<G>(lanes, bias, ncols, y);
}

// Rows of x per row block, whose micro-tiles all reuse one packed panel (K * 32 floats: 112
// KiB at K = 896, 608 KiB at K = 4864; it stays in L2 while they stream it). Each panel is
// packed once per block, so blocks are large: up to 4 MiB of x (all 128 rows of a prefill
// pass at K = 4864 in one block); a micro-tile's 8 rows of x stream from L2 or L3 in
// increasing k. With 1 MiB blocks down_proj's panels were packed 3 times per 128 rows, and
// its MatMul ran 1.10-1.15x slower (docs/models.md).
int64_t RowsPerBlock(int64_t K) {
  const int64_t rows = (4 * 1024 * 1024) / std::max<int64_t>(1, K * 4);
  return std::max<int64_t>(kMaxRows, rows / kMaxRows * kMaxRows);
}

struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};

// A thread's panel buffer, 64-byte aligned, at least `floats` long.
float* PanelBuffer(int64_t floats) {
  thread_local std::unique_ptr<float, AlignedFree> buffer;
  thread_local int64_t capacity = 0;
  if (floats > capacity) {
    const size_t bytes = static_cast<size_t>((floats * 4 + 63) / 64 * 64);
    buffer.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    capacity = floats;
  }
  return buffer.get();
}

// Prefill (and any M on row-major weights): per block of rows, each panel of 32 columns packed
// to f32 once by pack(n0, ncols, panel), then every micro-tile of the block over it.
template <class Pack>
void PanelPath(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
               int64_t n_begin, int64_t n_end, Pack pack) {
  const int64_t K = w.cols, N = w.rows;
  float* panel = PanelBuffer(K * kPanelCols);
  const int64_t block = RowsPerBlock(K);
  for (int64_t m0 = 0; m0 < M; m0 += block) {
    const int64_t m_end = std::min(M, m0 + block);
    for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanelCols) {
      const int64_t ncols = std::min<int64_t>(kPanelCols, n_end - n0);
      pack(n0, ncols, panel);
      const float* bias_n = bias ? bias + n0 : nullptr;
      for (int64_t m = m0; m < m_end; m += kMaxRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, m_end - m));
        RunRows<DType::kF32>(rows, x + m * K, K, panel, bias_n, ncols, y + m * N + n0, N);
      }
    }
  }
}

// ---- Q8_0 (kernels.h: kInterleaved32 holds, per group of 32 rows and block of 32 columns, the
// rows' f32 scales and then the int8 values as [k % 32][row % 32]) ----

// Rows c0 .. c0 + 15 of a block at element kk: the int8 values times their rows' scales, the
// exact dequantized weights (canonical::Q8_0Weight).
inline __m512 Q8Weights16(const uint8_t* block, int64_t kk, int c0, __m512 scale) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 128 + kk * 32 + c0));
  return Arith::Mul(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), scale);
}

// Decode over G groups of 32 Q8_0 rows: as DecodeGroups, one block (= one lane's 32 elements)
// at a time, its scales loaded once.
template <int G>
void DecodeGroupsQ8(const float* x, int64_t K, const uint8_t* groups, const float* bias,
                    int64_t ncols, float* y) {
  constexpr int V = 2 * G;
  alignas(64) __m512 lanes[canonical::kLanes][V];
  for (auto& lane : lanes) {
    for (auto& v : lane) v = _mm512_setzero_ps();
  }
  const int64_t blocks = K / kQ8_0BlockElems;
  const int64_t group_bytes = blocks * kQ8_0Interleaved32BlockBytes;
  for (int64_t b = 0; b < blocks; ++b) {
    const int lane = canonical::LaneOfBlock(b);
    __m512 acc[V], scale[V];
    const uint8_t* block[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      block[g] = groups + g * group_bytes + b * kQ8_0Interleaved32BlockBytes;
      for (int64_t line = 0; line < kQ8_0Interleaved32BlockBytes; line += 64) {
        _mm_prefetch(
            reinterpret_cast<const char*>(block[g] + 2 * kQ8_0Interleaved32BlockBytes + line),
            _MM_HINT_T0);
      }
      scale[2 * g] = _mm512_loadu_ps(block[g]);
      scale[2 * g + 1] = _mm512_loadu_ps(block[g] + 64);
      acc[2 * g] = lanes[lane][2 * g];
      acc[2 * g + 1] = lanes[lane][2 * g + 1];
    }
    const float* xb = x + b * kQ8_0BlockElems;
    for (int64_t kk = 0; kk < kQ8_0BlockElems; ++kk) {
      const __m512 xv = _mm512_set1_ps(xb[kk]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        acc[2 * g] =
            canonical::ChainStep<Arith>(acc[2 * g], xv, Q8Weights16(block[g], kk, 0, scale[2 * g]));
        acc[2 * g + 1] = canonical::ChainStep<Arith>(
            acc[2 * g + 1], xv, Q8Weights16(block[g], kk, 16, scale[2 * g + 1]));
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) lanes[lane][v] = acc[v];
  }
  StoreDecodedGroups<G>(lanes, bias, ncols, y);
}

// Packs columns [n0, n0 + ncols) of a Q8_0 `w` into f32 panel[k * 32 + c] (zeros past ncols).
void PackPanelQ8(const WeightView& w, int64_t n0, int64_t ncols, float* panel) {
  const int64_t K = w.cols, blocks = K / kQ8_0BlockElems;
  if (w.layout == WeightLayout::kInterleaved32) {  // the group's missing rows are zero
    const auto* group = static_cast<const uint8_t*>(w.data) +
                        (n0 / kPanelCols) * blocks * kQ8_0Interleaved32BlockBytes;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = group + b * kQ8_0Interleaved32BlockBytes;
      const __m512 s0 = _mm512_loadu_ps(block), s1 = _mm512_loadu_ps(block + 64);
      for (int64_t kk = 0; kk < kQ8_0BlockElems; ++kk) {
        float* row = panel + (b * kQ8_0BlockElems + kk) * kPanelCols;
        _mm512_store_ps(row, Q8Weights16(block, kk, 0, s0));
        _mm512_store_ps(row + 16, Q8Weights16(block, kk, 16, s1));
      }
    }
    return;
  }
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(K));
  for (int64_t c = 0; c < kPanelCols; ++c) {
    if (c < ncols) WeightRowToF32(w, n0 + c, K, row.data());
    for (int64_t k = 0; k < K; ++k) panel[k * kPanelCols + c] = c < ncols ? row[k] : 0.0f;
  }
}

void CanonicalQ8(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                 int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  if (w.layout == WeightLayout::kInterleaved32 && M == 1) {
    const auto* data = static_cast<const uint8_t*>(w.data);
    const int64_t group_bytes = K / kQ8_0BlockElems * kQ8_0Interleaved32BlockBytes;
    auto group_at = [&](int64_t n0) { return data + (n0 / kPanelCols) * group_bytes; };
    int64_t n0 = n_begin;
    constexpr int G = 4;
    for (; n0 + G * kPanelCols <= n_end; n0 += G * kPanelCols) {
      DecodeGroupsQ8<G>(x, K, group_at(n0), bias ? bias + n0 : nullptr, G * kPanelCols, y + n0);
    }
    for (; n0 < n_end; n0 += kPanelCols) {
      DecodeGroupsQ8<1>(x, K, group_at(n0), bias ? bias + n0 : nullptr,
                        std::min<int64_t>(kPanelCols, n_end - n0), y + n0);
    }
    return;
  }
  PanelPath(x, M, w, bias, y, n_begin, n_end,
            [&](int64_t n0, int64_t ncols, float* panel) { PackPanelQ8(w, n0, ncols, panel); });
}

// ---- records of nibbles in kInterleaved32: K-quants, Q4_1, Q5_1 (kernels/kquant_interleaved.h) --

// Rows 16c .. 16c + 15 of a group's canonical block b: their scales (and mins) made once, then
// the weights of any pair of elements.
template <DType T>
class NibbleRows16 {
 public:
  NibbleRows16(const uint8_t* group, int64_t b, int c)
      : sub_(kquant::SubRecordOfBlock(group, T, b)), c_(c) {
    if constexpr (IsAffineBlock32(T)) {  // the rows' d and m
      scale_ = HalvesToF32(sub_ + 32 * c);
      second_ = HalvesToF32(sub_ + 64 + 32 * c);
      return;
    }
    const uint8_t* record = kquant::RecordOfBlock(group, T, b);
    const __m512 d = HalvesToF32(record + 32 * c);
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sub_ + 16 * c));
    const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sub_ + 32 + 16 * c));
    if constexpr (T == DType::kQ6_K) {  // int8 scales of elements 0..15 and 16..31
      scale_ = Arith::Mul(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
      second_ = Arith::Mul(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(m)));
    } else {
      scale_ = Arith::Mul(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc)));
      second_ = Arith::Mul(HalvesToF32(record + 64 + 32 * c),
                           _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(m)));
    }
  }

  // The weights at elements 2p and 2p + 1.
  void Pair(int p, __m512* w0, __m512* w1) const {
    const uint8_t* nibble_bytes = sub_ + kquant::ScaleBytes(T);
    const __m512i nibbles = _mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(nibble_bytes + p * 32 + 16 * c_)));
    __m512i q0 = _mm512_and_si512(nibbles, _mm512_set1_epi32(0xF));
    __m512i q1 = _mm512_srli_epi32(nibbles, 4);
    const uint8_t* plane = nibble_bytes + kquant::kNibbleBytes;
    for (int b = 0; b < kquant::HighPlanes(T); ++b) {
      const __m512i bit = _mm512_set1_epi32(16 << b);
      q0 = _mm512_mask_add_epi32(q0, RowBits(plane + b * kquant::kPlaneBytes, 2 * p), q0, bit);
      q1 = _mm512_mask_add_epi32(q1, RowBits(plane + b * kquant::kPlaneBytes, 2 * p + 1), q1, bit);
    }
    if constexpr (T == DType::kQ6_K) {
      const __m512i minus32 = _mm512_set1_epi32(32);
      const __m512 scale = p < 8 ? scale_ : second_;
      *w0 = canonical::KQuantSymmetricWeight<Arith>(
          scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(q0, minus32)));
      *w1 = canonical::KQuantSymmetricWeight<Arith>(
          scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(q1, minus32)));
    } else if constexpr (IsAffineBlock32(T)) {
      *w0 = canonical::AffineBlock32Weight<Arith>(scale_, _mm512_cvtepi32_ps(q0), second_);
      *w1 = canonical::AffineBlock32Weight<Arith>(scale_, _mm512_cvtepi32_ps(q1), second_);
    } else {
      *w0 = canonical::KQuantAffineWeight<Arith>(scale_, _mm512_cvtepi32_ps(q0), second_);
      *w1 = canonical::KQuantAffineWeight<Arith>(scale_, _mm512_cvtepi32_ps(q1), second_);
    }
  }

 private:
  static __m512 HalvesToF32(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // The 16 rows' bits of element i in a plane.
  __mmask16 RowBits(const uint8_t* plane, int i) const {
    uint16_t bits;
    std::memcpy(&bits, plane + i * 4 + 2 * c_, 2);
    return _cvtu32_mask16(bits);
  }

  const uint8_t* sub_;
  int c_;
  // Q4_K / Q5_K: scale and min; Q6_K: the two halves' scales; Q4_1 / Q5_1: d and m.
  __m512 scale_, second_;
};

// Decode over G groups of 32 interleaved rows of records: as DecodeGroupsQ8, a block at a time.
template <DType T, int G>
void DecodeGroupsNibbles(const float* x, int64_t K, const uint8_t* groups, const float* bias,
                         int64_t ncols, float* y) {
  constexpr int V = 2 * G;
  alignas(64) __m512 lanes[canonical::kLanes][V];
  for (auto& lane : lanes) {
    for (auto& v : lane) v = _mm512_setzero_ps();
  }
  constexpr int64_t kSub = kquant::SubRecordBytes(T);
  const int64_t group_bytes = kquant::GroupBytes(T, K);
  for (int64_t b = 0; b < K / canonical::kBlockLen; ++b) {
    const int lane = canonical::LaneOfBlock(b);
    __m512 acc[V];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const uint8_t* ahead = kquant::SubRecordOfBlock(groups + g * group_bytes, T, b) + 2 * kSub;
      for (int64_t line = 0; line < kSub; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
      }
      acc[2 * g] = lanes[lane][2 * g];
      acc[2 * g + 1] = lanes[lane][2 * g + 1];
    }
    const float* xb = x + b * canonical::kBlockLen;
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      for (int c = 0; c < 2; ++c) {
        const NibbleRows16<T> rows(groups + g * group_bytes, b, c);
        __m512 a = acc[2 * g + c];
        for (int p = 0; p < 16; ++p) {
          __m512 w0, w1;
          rows.Pair(p, &w0, &w1);
          a = canonical::ChainStep<Arith>(a, _mm512_set1_ps(xb[2 * p]), w0);
          a = canonical::ChainStep<Arith>(a, _mm512_set1_ps(xb[2 * p + 1]), w1);
        }
        lanes[lane][2 * g + c] = a;
      }
    }
  }
  StoreDecodedGroups<G>(lanes, bias, ncols, y);
}

// Packs the 32 rows of the interleaved group holding column n0 into f32 panel[k * 32 + c]
// (a missing row's weights are zero).
template <DType T>
void PackPanelNibbles(const WeightView& w, int64_t n0, float* panel) {
  const uint8_t* group = kquant::Group(w, n0 / kPanelCols);
  for (int64_t b = 0; b < w.cols / canonical::kBlockLen; ++b) {
    float* block = panel + b * canonical::kBlockLen * kPanelCols;
    for (int c = 0; c < 2; ++c) {
      const NibbleRows16<T> rows(group, b, c);
      for (int p = 0; p < 16; ++p) {
        __m512 w0, w1;
        rows.Pair(p, &w0, &w1);
        _mm512_store_ps(block + (2 * p) * kPanelCols + 16 * c, w0);
        _mm512_store_ps(block + (2 * p + 1) * kPanelCols + 16 * c, w1);
      }
    }
  }
}

template <DType T>
void CanonicalNibbles(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                      int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  if (M == 1) {
    auto group_at = [&](int64_t n0) { return kquant::Group(w, n0 / kPanelCols); };
    int64_t n0 = n_begin;
    constexpr int G = 4;
    for (; n0 + G * kPanelCols <= n_end; n0 += G * kPanelCols) {
      DecodeGroupsNibbles<T, G>(x, K, group_at(n0), bias ? bias + n0 : nullptr, G * kPanelCols,
                                y + n0);
    }
    for (; n0 < n_end; n0 += kPanelCols) {
      DecodeGroupsNibbles<T, 1>(x, K, group_at(n0), bias ? bias + n0 : nullptr,
                                std::min<int64_t>(kPanelCols, n_end - n0), y + n0);
    }
    return;
  }
  PanelPath(x, M, w, bias, y, n_begin, n_end,
            [&](int64_t n0, int64_t, float* panel) { PackPanelNibbles<T>(w, n0, panel); });
}

template <DType D>
void CanonicalTyped(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                    int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  const int64_t N = w.rows;
  const bool interleaved = w.layout == WeightLayout::kInterleaved32;
  if (interleaved && M == 1) {
    const auto* data = static_cast<const WeightT<D>*>(w.data);
    int64_t n0 = n_begin;
    constexpr int G = 4;
    for (; n0 + G * kPanelCols <= n_end; n0 += G * kPanelCols) {
      DecodeGroups<D, G>(x, K, data + n0 * K, bias ? bias + n0 : nullptr, G * kPanelCols, y + n0);
    }
    for (; n0 < n_end; n0 += kPanelCols) {
      DecodeGroups<D, 1>(x, K, data + n0 * K, bias ? bias + n0 : nullptr,
                         std::min<int64_t>(kPanelCols, n_end - n0), y + n0);
    }
    return;
  }
  if (interleaved && M <= kMaxRows) {
    // One micro-tile of rows per panel: packing would cost as much as it saves.
    for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanelCols) {
      RunRows<D>(static_cast<int>(M), x, K, static_cast<const WeightT<D>*>(w.data) + n0 * K,
                 bias ? bias + n0 : nullptr, std::min<int64_t>(kPanelCols, n_end - n0), y + n0, N);
    }
    return;
  }
  PanelPath(x, M, w, bias, y, n_begin, n_end,
            [&](int64_t n0, int64_t ncols, float* panel) { PackPanel<D>(w, n0, ncols, panel); });
}

}  // namespace

void MatMulCanonical(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end) {
  if (w.dtype == DType::kQ8_0) return CanonicalQ8(x, M, w, bias, y, n_begin, n_end);
  switch (w.dtype) {  // records of nibbles: kInterleaved32 only (the dispatch sends row-major
                      // ones elsewhere)
    case DType::kQ4_K:
      return CanonicalNibbles<DType::kQ4_K>(x, M, w, bias, y, n_begin, n_end);
    case DType::kQ5_K:
      return CanonicalNibbles<DType::kQ5_K>(x, M, w, bias, y, n_begin, n_end);
    case DType::kQ6_K:
      return CanonicalNibbles<DType::kQ6_K>(x, M, w, bias, y, n_begin, n_end);
    case DType::kQ4_1:
      return CanonicalNibbles<DType::kQ4_1>(x, M, w, bias, y, n_begin, n_end);
    case DType::kQ5_1:
      return CanonicalNibbles<DType::kQ5_1>(x, M, w, bias, y, n_begin, n_end);
    default:
      break;
  }
  WithDType(w.dtype,
            [&](auto d) { CanonicalTyped<decltype(d)::value>(x, M, w, bias, y, n_begin, n_end); });
}

}  // namespace trace::kernels::avx512
