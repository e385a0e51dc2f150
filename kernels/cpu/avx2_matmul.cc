// AVX2 MatMul. Canonical: vectorised across 8 output columns so that one register holds
// one lane's accumulators for 8 columns; each (lane, column) chain is the contract's
// sequential fma over its blocks in increasing k, then the 32 lanes fold left to right
// (canonical::ChainStep / FoldLanes / AddBias of kernels/canonical.h with avx2::Arith).
// Equals ref::MatMulCanonical bit for bit for every M, column range and thread count.
// Fast: the conventional baseline, 8-wide partial sums along K (a different order).
// Q8_0 (canonical only): decode streams the interleaved blocks (int8 -> f32, times the
// row's scale: the exact weight), prefill packs dequantized 8-column panels.
// K-quants, Q4_1 and Q5_1 (kInterleaved32, kernels/kquant_interleaved.h): the same two
// schedules, 8 rows' weights dequantized in a register from their nibbles and high bits
// (canonical::KQuantAffineWeight / KQuantSymmetricWeight / AffineBlock32Weight), the scales
// made once per block.
// Shapes: x [M, K], w [N, K] bf16|f16|f32|q8_0|q4_k|q5_k|q6_k|q4_1|q5_1, y [M, N]; a column range
// [n_begin, n_end) from the dispatch. Check: ctest -R 'KernelsMatMul'; bench: bench/kernels.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/avx2_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kquant_interleaved.h"

namespace trace::kernels::avx2 {
namespace {

constexpr int kRowsPerMicroTile = 6;

template <DType D>
using WeightT = std::conditional_t<D == DType::kF32, float, uint16_t>;

// Columns n0 .. n0 + 7 (n0 % 8 == 0) of kInterleaved32 weights: element (k, c) at
// result[k * 32 + c].
template <DType D>
const void* InterleavedPanel(const WeightView& w, int64_t n0) {
  return static_cast<const WeightT<D>*>(w.data) + (n0 / 32) * w.cols * 32 + n0 % 32;
}

// Rows of x per tile: sized so a tile of x stays in L2 while the weights stream.
int64_t RowsPerTile(int64_t K) {
  const int64_t rows = (192 * 1024) / std::max<int64_t>(1, K * 4);
  return std::clamp<int64_t>(rows / kRowsPerMicroTile * kRowsPerMicroTile, kRowsPerMicroTile, 96);
}

// panel[k * 8 + c] = f32(w[n0 + c, k]) for c < ncols, 0 for the missing columns.
template <DType D>
void PackPanel(const WeightView& w, int64_t n0, int64_t ncols, float* panel) {
  const int64_t K = w.cols;
  int64_t k = 0;
  if (ncols == 8) {
    for (; k + 8 <= K; k += 8) {
      __m256 r[8];
      for (int c = 0; c < 8; ++c) r[c] = LoadWeights8<D>(w.data, (n0 + c) * K + k);
      Transpose8x8(r);
      for (int i = 0; i < 8; ++i) _mm256_store_ps(panel + (k + i) * 8, r[i]);
    }
  }
  for (; k < K; ++k) {
    for (int64_t c = 0; c < 8; ++c) panel[k * 8 + c] = c < ncols ? WeightAt(w, n0 + c, k) : 0.0f;
  }
}

// Runs Q consecutive whole blocks at a time (b a multiple of Q, 32 % Q == 0, so they
// belong to Q distinct lanes): Q * R independent fma chains hide the fma latency, while
// each chain still visits its block's k in increasing order.
template <DType PD, int R, int Q>
void RunBlockGroups(const float* x, int64_t K, const void* panel, int64_t stride,
                    __m256 (*lanes)[R], int64_t& b, int64_t full_blocks) {
  for (; b + Q <= full_blocks; b += Q) {
    __m256 acc[Q][R];
    for (int q = 0; q < Q; ++q) {
      for (int r = 0; r < R; ++r) acc[q][r] = lanes[canonical::LaneOfBlock(b + q)][r];
    }
    for (int64_t i = 0; i < 32; ++i) {
      for (int q = 0; q < Q; ++q) {
        const int64_t k = (b + q) * 32 + i;
        const __m256 wv = LoadWeights8<PD>(panel, k * stride);
        for (int r = 0; r < R; ++r) {
          acc[q][r] =
              canonical::ChainStep<Arith>(acc[q][r], _mm256_broadcast_ss(x + r * K + k), wv);
        }
      }
    }
    for (int q = 0; q < Q; ++q) {
      for (int r = 0; r < R; ++r) lanes[canonical::LaneOfBlock(b + q)][r] = acc[q][r];
    }
  }
}

// y[r, n0 .. n0 + ncols) for R rows of x against one panel of 8 columns: element (k, c)
// at panel[k * stride + c] in dtype PD (an f32 panel packed from row-major weights with
// stride 8, or kInterleaved32 weights read in place with stride 32).
template <DType PD, int R>
void MicroTile(const float* x, int64_t K, const void* panel, int64_t stride, const float* bias,
               int64_t ncols, float* y, int64_t ldy) {
  __m256 lanes[32][R];
  for (int l = 0; l < 32; ++l) {
    for (int r = 0; r < R; ++r) lanes[l][r] = _mm256_setzero_ps();
  }
  // Whole blocks in groups of 8, 4, 2 (fewer groups as the rows give more chains), then
  // the rest one block at a time, the last block possibly partial. Blocks are visited in
  // increasing order throughout, so every lane's chain keeps the contract's order.
  const int64_t full_blocks = K / 32;
  int64_t b = 0;
  if constexpr (R == 1) RunBlockGroups<PD, R, 8>(x, K, panel, stride, lanes, b, full_blocks);
  if constexpr (R <= 2) RunBlockGroups<PD, R, 4>(x, K, panel, stride, lanes, b, full_blocks);
  RunBlockGroups<PD, R, 2>(x, K, panel, stride, lanes, b, full_blocks);
  const int64_t n_blocks = (K + 31) / 32;
  for (; b < n_blocks; ++b) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = lanes[canonical::LaneOfBlock(b)][r];
    const int64_t k_end = canonical::BlockEnd(b, K);
    for (int64_t k = canonical::BlockBegin(b); k < k_end; ++k) {
      const __m256 wv = LoadWeights8<PD>(panel, k * stride);
      for (int r = 0; r < R; ++r) {
        acc[r] = canonical::ChainStep<Arith>(acc[r], _mm256_broadcast_ss(x + r * K + k), wv);
      }
    }
    for (int r = 0; r < R; ++r) lanes[canonical::LaneOfBlock(b)][r] = acc[r];
  }
  alignas(32) float tmp[8];
  for (int r = 0; r < R; ++r) {
    __m256 sum = canonical::FoldLanes<Arith>(&lanes[0][r], R);
    if (ncols == 8) {
      if (bias != nullptr) sum = canonical::AddBias<Arith>(sum, _mm256_loadu_ps(bias));
      _mm256_storeu_ps(y + r * ldy, sum);
    } else {
      _mm256_store_ps(tmp, sum);
      for (int64_t c = 0; c < ncols; ++c) {
        y[r * ldy + c] = bias ? canonical::AddBias(tmp[c], bias[c]) : tmp[c];
      }
    }
  }
}

template <DType PD>
void RunRows(int rows, const float* x, int64_t K, const void* panel, int64_t stride,
             const float* bias, int64_t ncols, float* y, int64_t ldy) {
  switch (rows) {
    case 1:
      return MicroTile<PD, 1>(x, K, panel, stride, bias, ncols, y, ldy);
    case 2:
      return MicroTile<PD, 2>(x, K, panel, stride, bias, ncols, y, ldy);
    case 3:
      return MicroTile<PD, 3>(x, K, panel, stride, bias, ncols, y, ldy);
    case 4:
      return MicroTile<PD, 4>(x, K, panel, stride, bias, ncols, y, ldy);
    case 5:
      return MicroTile<PD, 5>(x, K, panel, stride, bias, ncols, y, ldy);
    default:
      return MicroTile<PD, 6>(x, K, panel, stride, bias, ncols, y, ldy);
  }
}

// One row of x (decode) against 8 columns, without a panel: the 8 weight rows are read
// 8 elements at a time and transposed in registers, so the bf16 weights stream once.
// Q = 4 whole blocks (4 distinct lanes) are interleaved to overlap their fma chains.
template <DType D>
void DecodeColumns8(const float* x, const WeightView& w, int64_t n0, const float* bias, float* y) {
  const int64_t K = w.cols;
  __m256 lanes[32];
  for (auto& l : lanes) l = _mm256_setzero_ps();
  const int64_t full_blocks = K / 32;
  int64_t b = 0;
  constexpr int Q = 4;
  for (; b + Q <= full_blocks; b += Q) {
    __m256 acc[Q];
    for (int q = 0; q < Q; ++q) acc[q] = lanes[canonical::LaneOfBlock(b + q)];
    for (int64_t i = 0; i < 32; i += 8) {
      for (int q = 0; q < Q; ++q) {
        const int64_t k = (b + q) * 32 + i;
        __m256 r[8];
        for (int c = 0; c < 8; ++c) r[c] = LoadWeights8<D>(w.data, (n0 + c) * K + k);
        Transpose8x8(r);
        for (int t = 0; t < 8; ++t) {
          acc[q] = canonical::ChainStep<Arith>(acc[q], _mm256_broadcast_ss(x + k + t), r[t]);
        }
      }
    }
    for (int q = 0; q < Q; ++q) lanes[canonical::LaneOfBlock(b + q)] = acc[q];
  }
  // The remaining blocks in order; whole 8-element steps transposed, the tail gathered.
  for (int64_t k = b * 32; k < K;) {
    __m256& acc = lanes[canonical::LaneOfElement(k)];
    if (k % 32 + 8 <= 32 && k + 8 <= K) {
      __m256 r[8];
      for (int c = 0; c < 8; ++c) r[c] = LoadWeights8<D>(w.data, (n0 + c) * K + k);
      Transpose8x8(r);
      for (int t = 0; t < 8; ++t) {
        acc = canonical::ChainStep<Arith>(acc, _mm256_broadcast_ss(x + k + t), r[t]);
      }
      k += 8;
    } else {
      alignas(32) float col[8];
      for (int c = 0; c < 8; ++c) col[c] = WeightAt(w, n0 + c, k);
      acc = canonical::ChainStep<Arith>(acc, _mm256_broadcast_ss(x + k), _mm256_load_ps(col));
      k += 1;
    }
  }
  __m256 sum = canonical::FoldLanes<Arith>(lanes);
  if (bias != nullptr) sum = canonical::AddBias<Arith>(sum, _mm256_loadu_ps(bias + n0));
  _mm256_storeu_ps(y + n0, sum);
}

// Decode on kInterleaved32 weights: one group of 32 columns, 4 registers of 8 columns side
// by side, one block at a time: 4 independent fma chains reading one sequential stream
// (one 64-byte line per k in bf16), which DRAM and the prefetcher serve best.
template <DType D>
void DecodeInterleaved4(const float* x, int64_t K, const void* panels, const float* bias,
                        float* y) {
  constexpr int G = 4;
  const auto* base = static_cast<const WeightT<D>*>(panels);
  __m256 lanes[32][G];
  for (auto& l : lanes) {
    for (int g = 0; g < G; ++g) l[g] = _mm256_setzero_ps();
  }
  const int64_t n_blocks = (K + 31) / 32;
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256 acc[G];
    for (int g = 0; g < G; ++g) acc[g] = lanes[canonical::LaneOfBlock(b)][g];
    const int64_t k_end = canonical::BlockEnd(b, K);
    for (int64_t k = canonical::BlockBegin(b); k < k_end; ++k) {
      const __m256 xv = _mm256_broadcast_ss(x + k);
      for (int g = 0; g < G; ++g) {
        acc[g] = canonical::ChainStep<Arith>(acc[g], xv, LoadWeights8<D>(base, k * 32 + g * 8));
      }
    }
    for (int g = 0; g < G; ++g) lanes[canonical::LaneOfBlock(b)][g] = acc[g];
  }
  for (int g = 0; g < G; ++g) {
    __m256 sum = canonical::FoldLanes<Arith>(&lanes[0][g], G);
    if (bias != nullptr) sum = canonical::AddBias<Arith>(sum, _mm256_loadu_ps(bias + g * 8));
    _mm256_storeu_ps(y + g * 8, sum);
  }
}

template <DType D>
void CanonicalTyped(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                    int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  const int64_t N = w.rows;
  const int64_t tile = RowsPerTile(K);
  if (w.layout == WeightLayout::kInterleaved32) {
    // The weights are already panels (n_begin is a multiple of 32: the dispatch's split).
    int64_t n_start = n_begin;
    if (M == 1) {
      for (; n_start + 32 <= n_end; n_start += 32) {
        DecodeInterleaved4<D>(x, K, static_cast<const WeightT<D>*>(w.data) + n_start * K,
                              bias ? bias + n_start : nullptr, y + n_start);
      }
    }
    for (int64_t m0 = 0; m0 < M; m0 += tile) {
      const int64_t m_end = std::min(M, m0 + tile);
      for (int64_t n0 = n_start; n0 < n_end; n0 += 8) {
        const int64_t ncols = std::min<int64_t>(8, n_end - n0);
        const void* panel = InterleavedPanel<D>(w, n0);
        const float* bias_n = bias ? bias + n0 : nullptr;
        for (int64_t m = m0; m < m_end; m += kRowsPerMicroTile) {
          const int rows = static_cast<int>(std::min<int64_t>(kRowsPerMicroTile, m_end - m));
          RunRows<D>(rows, x + m * K, K, panel, 32, bias_n, ncols, y + m * N + n0, N);
        }
      }
    }
    return;
  }
  thread_local std::vector<float> panel_storage;
  panel_storage.resize(static_cast<size_t>(K * 8 + 8));
  // 32-byte align the panel inside the buffer.
  float* panel = panel_storage.data();
  while (reinterpret_cast<uintptr_t>(panel) % 32 != 0) ++panel;
  int64_t first_packed = n_begin;
  if (M == 1) {
    for (; first_packed + 8 <= n_end; first_packed += 8) {
      DecodeColumns8<D>(x, w, first_packed, bias, y);
    }
  }
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t m_end = std::min(M, m0 + tile);
    for (int64_t n0 = first_packed; n0 < n_end; n0 += 8) {
      const int64_t ncols = std::min<int64_t>(8, n_end - n0);
      PackPanel<D>(w, n0, ncols, panel);
      const float* bias_n = bias ? bias + n0 : nullptr;
      for (int64_t m = m0; m < m_end; m += kRowsPerMicroTile) {
        const int rows = static_cast<int>(std::min<int64_t>(kRowsPerMicroTile, m_end - m));
        RunRows<DType::kF32>(rows, x + m * K, K, panel, 8, bias_n, ncols, y + m * N + n0, N);
      }
    }
  }
}

// Fast on kInterleaved32 weights: 8 columns per register, 4 partial sums by k mod 4.
template <DType D, int R>
void FastInterleavedRows(const float* x, int64_t K, const void* panel, const float* bias,
                         int64_t ncols, float* y, int64_t ldy) {
  constexpr int64_t stride = 32;
  __m256 acc[4][R];
  for (auto& a : acc) {
    for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    for (int j = 0; j < 4; ++j) {
      const __m256 wv = LoadWeights8<D>(panel, (k + j) * stride);
      for (int r = 0; r < R; ++r) {
        acc[j][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r * K + k + j), wv, acc[j][r]);
      }
    }
  }
  for (; k < K; ++k) {
    const __m256 wv = LoadWeights8<D>(panel, k * stride);
    for (int r = 0; r < R; ++r) {
      acc[0][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(x + r * K + k), wv, acc[0][r]);
    }
  }
  alignas(32) float tmp[8];
  for (int r = 0; r < R; ++r) {
    const __m256 sum =
        _mm256_add_ps(_mm256_add_ps(acc[0][r], acc[1][r]), _mm256_add_ps(acc[2][r], acc[3][r]));
    _mm256_store_ps(tmp, sum);
    for (int64_t c = 0; c < ncols; ++c) y[r * ldy + c] = bias ? tmp[c] + bias[c] : tmp[c];
  }
}

template <DType D>
void FastInterleaved(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  const int64_t N = w.rows;
  const int64_t tile = RowsPerTile(K);
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t m_end = std::min(M, m0 + tile);
    for (int64_t n0 = n_begin; n0 < n_end; n0 += 8) {
      const int64_t ncols = std::min<int64_t>(8, n_end - n0);
      const void* panel = InterleavedPanel<D>(w, n0);
      const float* bias_n = bias ? bias + n0 : nullptr;
      int64_t m = m0;
      for (; m + 3 <= m_end; m += 3) {
        FastInterleavedRows<D, 3>(x + m * K, K, panel, bias_n, ncols, y + m * N + n0, N);
      }
      for (; m < m_end; ++m) {
        FastInterleavedRows<D, 1>(x + m * K, K, panel, bias_n, ncols, y + m * N + n0, N);
      }
    }
  }
}

// Fast: for each column, R rows at once with two 8-wide accumulators along K.
template <DType D, int R>
void FastColumn(const float* x, int64_t K, const WeightView& w, int64_t n, const float* bias,
                float* y, int64_t ldy) {
  __m256 a0[R], a1[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm256_setzero_ps();
  const int64_t base = n * K;
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m256 w0 = LoadWeights8<D>(w.data, base + k);
    const __m256 w1 = LoadWeights8<D>(w.data, base + k + 8);
    for (int r = 0; r < R; ++r) {
      a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * K + k), w0, a0[r]);
      a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * K + k + 8), w1, a1[r]);
    }
  }
  for (; k + 8 <= K; k += 8) {
    const __m256 w0 = LoadWeights8<D>(w.data, base + k);
    for (int r = 0; r < R; ++r) a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * K + k), w0, a0[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = HorizontalSum(_mm256_add_ps(a0[r], a1[r]));
    for (int64_t kk = k; kk < K; ++kk) s = std::fma(x[r * K + kk], WeightAt(w, n, kk), s);
    if (bias != nullptr) s = s + bias[n];
    y[r * ldy + n] = s;
  }
}

template <DType D>
void FastTyped(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
               int64_t n_begin, int64_t n_end) {
  if (w.layout == WeightLayout::kInterleaved32) {
    return FastInterleaved<D>(x, M, w, bias, y, n_begin, n_end);
  }
  const int64_t K = w.cols;
  const int64_t N = w.rows;
  constexpr int kRows = 4;
  const int64_t tile = RowsPerTile(K);
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t m_end = std::min(M, m0 + tile);
    for (int64_t n = n_begin; n < n_end; ++n) {
      int64_t m = m0;
      for (; m + kRows <= m_end; m += kRows) {
        FastColumn<D, kRows>(x + m * K, K, w, n, bias, y + m * N, N);
      }
      for (; m < m_end; ++m) FastColumn<D, 1>(x + m * K, K, w, n, bias, y + m * N, N);
    }
  }
}

// ---- Q8_0 (kernels.h: kInterleaved32 holds, per group of 32 rows and block of 32 columns, the
// rows' f32 scales and then the int8 values as [k % 32][row % 32]) ----

// Rows c0 .. c0 + 7 of a block at element kk: the int8 values times their rows' scales (exact).
inline __m256 Q8Weights8(const uint8_t* block, int64_t kk, int64_t c0, __m256 scale) {
  const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 128 + kk * 32 + c0));
  return Arith::Mul(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), scale);
}

// Decode: one group of 32 interleaved Q8_0 rows, 4 registers of 8 side by side, a block
// (one lane's 32 elements) at a time with its scales loaded once.
void DecodeQ8Interleaved4(const float* x, int64_t K, const uint8_t* group, const float* bias,
                          float* y) {
  constexpr int G = 4;
  __m256 lanes[32][G];
  for (auto& l : lanes) {
    for (int g = 0; g < G; ++g) l[g] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < K / kQ8_0BlockElems; ++b) {
    const uint8_t* block = group + b * kQ8_0Interleaved32BlockBytes;
    _mm_prefetch(reinterpret_cast<const char*>(block + 2 * kQ8_0Interleaved32BlockBytes),
                 _MM_HINT_T0);
    __m256 acc[G], scale[G];
    for (int g = 0; g < G; ++g) {
      acc[g] = lanes[canonical::LaneOfBlock(b)][g];
      scale[g] = _mm256_loadu_ps(reinterpret_cast<const float*>(block) + 8 * g);
    }
    for (int64_t kk = 0; kk < kQ8_0BlockElems; ++kk) {
      const __m256 xv = _mm256_broadcast_ss(x + b * kQ8_0BlockElems + kk);
      for (int g = 0; g < G; ++g) {
        acc[g] = canonical::ChainStep<Arith>(acc[g], xv, Q8Weights8(block, kk, 8 * g, scale[g]));
      }
    }
    for (int g = 0; g < G; ++g) lanes[canonical::LaneOfBlock(b)][g] = acc[g];
  }
  for (int g = 0; g < G; ++g) {
    __m256 sum = canonical::FoldLanes<Arith>(&lanes[0][g], G);
    if (bias != nullptr) sum = canonical::AddBias<Arith>(sum, _mm256_loadu_ps(bias + g * 8));
    _mm256_storeu_ps(y + g * 8, sum);
  }
}

// panel[k * 8 + c] = w[n0 + c, k] dequantized, 0 for the missing columns.
void PackPanelQ8(const WeightView& w, int64_t n0, int64_t ncols, float* panel) {
  const int64_t K = w.cols;
  if (w.layout == WeightLayout::kInterleaved32) {  // the group's missing rows are zero
    const auto* group = static_cast<const uint8_t*>(w.data) +
                        (n0 / 32) * (K / kQ8_0BlockElems) * kQ8_0Interleaved32BlockBytes;
    for (int64_t b = 0; b < K / kQ8_0BlockElems; ++b) {
      const uint8_t* block = group + b * kQ8_0Interleaved32BlockBytes;
      const __m256 scale = _mm256_loadu_ps(reinterpret_cast<const float*>(block) + n0 % 32);
      for (int64_t kk = 0; kk < kQ8_0BlockElems; ++kk) {
        _mm256_store_ps(panel + (b * kQ8_0BlockElems + kk) * 8,
                        Q8Weights8(block, kk, n0 % 32, scale));
      }
    }
    return;
  }
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < 8; ++c) panel[k * 8 + c] = c < ncols ? WeightAt(w, n0 + c, k) : 0.0f;
  }
}

// Prefill of a block type: columns [n_start, n_end) in 8-column panels, each packed to f32 once
// per tile of rows by pack(n0, ncols, panel), then every micro-tile of the tile over it.
template <class Pack>
void PackedPanels(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                  int64_t n_start, int64_t n_end, Pack pack) {
  const int64_t K = w.cols, N = w.rows;
  thread_local std::vector<float> panel_storage;
  panel_storage.resize(static_cast<size_t>(K * 8 + 8));
  float* panel = panel_storage.data();  // 32-byte aligned inside the buffer
  while (reinterpret_cast<uintptr_t>(panel) % 32 != 0) ++panel;
  const int64_t tile = RowsPerTile(K);
  for (int64_t m0 = 0; m0 < M; m0 += tile) {
    const int64_t m_end = std::min(M, m0 + tile);
    for (int64_t n0 = n_start; n0 < n_end; n0 += 8) {
      const int64_t ncols = std::min<int64_t>(8, n_end - n0);
      pack(n0, ncols, panel);
      const float* bias_n = bias ? bias + n0 : nullptr;
      for (int64_t m = m0; m < m_end; m += kRowsPerMicroTile) {
        const int rows = static_cast<int>(std::min<int64_t>(kRowsPerMicroTile, m_end - m));
        RunRows<DType::kF32>(rows, x + m * K, K, panel, 8, bias_n, ncols, y + m * N + n0, N);
      }
    }
  }
}

void CanonicalQ8(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                 int64_t n_begin, int64_t n_end) {
  const int64_t K = w.cols;
  int64_t n_start = n_begin;
  if (M == 1 && w.layout == WeightLayout::kInterleaved32) {
    const int64_t group_bytes = K / kQ8_0BlockElems * kQ8_0Interleaved32BlockBytes;
    for (; n_start + 32 <= n_end; n_start += 32) {
      DecodeQ8Interleaved4(x, K, static_cast<const uint8_t*>(w.data) + n_start / 32 * group_bytes,
                           bias ? bias + n_start : nullptr, y + n_start);
    }
  }
  PackedPanels(x, M, w, bias, y, n_start, n_end,
               [&](int64_t n0, int64_t ncols, float* panel) { PackPanelQ8(w, n0, ncols, panel); });
}

// ---- records of nibbles in kInterleaved32: K-quants, Q4_1, Q5_1 (kernels/kquant_interleaved.h) --

// Rows 8c .. 8c + 7 of a group's canonical block b: their scales (and mins) made once, then the
// weights of any pair of elements.
template <DType T>
class NibbleRows8 {
 public:
  NibbleRows8(const uint8_t* group, int64_t b, int c)
      : sub_(kquant::SubRecordOfBlock(group, T, b)), c_(c) {
    if constexpr (IsAffineBlock32(T)) {  // the rows' d and m
      scale_ = HalvesToF32(sub_ + 16 * c);
      second_ = HalvesToF32(sub_ + 64 + 16 * c);
      return;
    }
    const uint8_t* record = kquant::RecordOfBlock(group, T, b);
    const __m256 d = HalvesToF32(record + 16 * c);
    const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sub_ + 8 * c));
    const __m128i m = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sub_ + 32 + 8 * c));
    if constexpr (T == DType::kQ6_K) {  // int8 scales of elements 0..15 and 16..31
      scale_ = Arith::Mul(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
      second_ = Arith::Mul(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(m)));
    } else {
      scale_ = Arith::Mul(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
      second_ = Arith::Mul(HalvesToF32(record + 64 + 16 * c),
                           _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)));
    }
  }

  // The weights at elements 2p and 2p + 1.
  void Pair(int p, __m256* w0, __m256* w1) const {
    const uint8_t* nibble_bytes = sub_ + kquant::ScaleBytes(T);
    const __m256i nibbles = _mm256_cvtepu8_epi32(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(nibble_bytes + p * 32 + 8 * c_)));
    __m256i q0 = _mm256_and_si256(nibbles, _mm256_set1_epi32(0xF));
    __m256i q1 = _mm256_srli_epi32(nibbles, 4);
    const uint8_t* plane = nibble_bytes + kquant::kNibbleBytes;
    for (int b = 0; b < kquant::HighPlanes(T); ++b) {
      const uint8_t* bits = plane + b * kquant::kPlaneBytes + c_;
      q0 = _mm256_or_si256(q0, HighBit(bits[(2 * p) * 4], 4 + b));
      q1 = _mm256_or_si256(q1, HighBit(bits[(2 * p + 1) * 4], 4 + b));
    }
    if constexpr (T == DType::kQ6_K) {
      const __m256i minus32 = _mm256_set1_epi32(32);
      const __m256 scale = p < 8 ? scale_ : second_;
      *w0 = canonical::KQuantSymmetricWeight<Arith>(
          scale, _mm256_cvtepi32_ps(_mm256_sub_epi32(q0, minus32)));
      *w1 = canonical::KQuantSymmetricWeight<Arith>(
          scale, _mm256_cvtepi32_ps(_mm256_sub_epi32(q1, minus32)));
    } else if constexpr (IsAffineBlock32(T)) {
      *w0 = canonical::AffineBlock32Weight<Arith>(scale_, _mm256_cvtepi32_ps(q0), second_);
      *w1 = canonical::AffineBlock32Weight<Arith>(scale_, _mm256_cvtepi32_ps(q1), second_);
    } else {
      *w0 = canonical::KQuantAffineWeight<Arith>(scale_, _mm256_cvtepi32_ps(q0), second_);
      *w1 = canonical::KQuantAffineWeight<Arith>(scale_, _mm256_cvtepi32_ps(q1), second_);
    }
  }

 private:
  static __m256 HalvesToF32(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // 1 << shift in the rows whose bit is set in `bits` (row 8c + i at bit i), else 0.
  static __m256i HighBit(uint8_t bits, int shift) {
    const __m256i select = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i set =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(bits), select), select);
    return _mm256_and_si256(set, _mm256_set1_epi32(1 << shift));
  }

  const uint8_t* sub_;
  int c_;
  // Q4_K / Q5_K: scale and min; Q6_K: the two halves' scales; Q4_1 / Q5_1: d and m.
  __m256 scale_, second_;
};

// Decode: one group of 32 interleaved rows of records, 4 registers of 8 side by side, a block
// at a time.
template <DType T>
void DecodeNibblesInterleaved4(const float* x, int64_t K, const uint8_t* group, const float* bias,
                               float* y) {
  constexpr int G = 4;
  __m256 lanes[32][G];
  for (auto& l : lanes) {
    for (int g = 0; g < G; ++g) l[g] = _mm256_setzero_ps();
  }
  constexpr int64_t kSub = kquant::SubRecordBytes(T);
  for (int64_t b = 0; b < K / canonical::kBlockLen; ++b) {
    const uint8_t* ahead = kquant::SubRecordOfBlock(group, T, b) + 2 * kSub;
    for (int64_t line = 0; line < kSub; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
    }
    const float* xb = x + b * canonical::kBlockLen;
    for (int g = 0; g < G; ++g) {
      const NibbleRows8<T> rows(group, b, g);
      __m256 acc = lanes[canonical::LaneOfBlock(b)][g];
      for (int p = 0; p < 16; ++p) {
        __m256 w0, w1;
        rows.Pair(p, &w0, &w1);
        acc = canonical::ChainStep<Arith>(acc, _mm256_broadcast_ss(xb + 2 * p), w0);
        acc = canonical::ChainStep<Arith>(acc, _mm256_broadcast_ss(xb + 2 * p + 1), w1);
      }
      lanes[canonical::LaneOfBlock(b)][g] = acc;
    }
  }
  for (int g = 0; g < G; ++g) {
    __m256 sum = canonical::FoldLanes<Arith>(&lanes[0][g], G);
    if (bias != nullptr) sum = canonical::AddBias<Arith>(sum, _mm256_loadu_ps(bias + g * 8));
    _mm256_storeu_ps(y + g * 8, sum);
  }
}

// panel[k * 8 + c] = w[n0 + c, k] dequantized (a missing row's weights are zero).
template <DType T>
void PackPanelNibbles(const WeightView& w, int64_t n0, float* panel) {
  const uint8_t* group = kquant::Group(w, n0 / 32);
  for (int64_t b = 0; b < w.cols / canonical::kBlockLen; ++b) {
    const NibbleRows8<T> rows(group, b, static_cast<int>(n0 % 32 / 8));
    float* block = panel + b * canonical::kBlockLen * 8;
    for (int p = 0; p < 16; ++p) {
      __m256 w0, w1;
      rows.Pair(p, &w0, &w1);
      _mm256_store_ps(block + (2 * p) * 8, w0);
      _mm256_store_ps(block + (2 * p + 1) * 8, w1);
    }
  }
}

template <DType T>
void CanonicalNibbles(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                      int64_t n_begin, int64_t n_end) {
  int64_t n_start = n_begin;
  if (M == 1) {
    for (; n_start + 32 <= n_end; n_start += 32) {
      DecodeNibblesInterleaved4<T>(x, w.cols, kquant::Group(w, n_start / 32),
                                   bias ? bias + n_start : nullptr, y + n_start);
    }
  }
  PackedPanels(x, M, w, bias, y, n_start, n_end,
               [&](int64_t n0, int64_t, float* panel) { PackPanelNibbles<T>(w, n0, panel); });
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

void MatMulFast(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                int64_t n_begin, int64_t n_end) {
  WithDType(w.dtype,
            [&](auto d) { FastTyped<decltype(d)::value>(x, M, w, bias, y, n_begin, n_end); });
}

}  // namespace trace::kernels::avx2
