// AVX2 paths of the small ops: CanonicalDot (for RmsNorm), RmsNorm, Embedding, Rope,
// SiluMul, GeluTanhMul, Add, Exp8. Each equals its scalar reference (kernels/cpu/ref_*.cc) bit for
// bit: the elementwise ops run the templates of kernels/canonical.h with avx2::Arith (the same IEEE
// operations per element) and their scalar tails the scalar ones; CanonicalDot keeps each lane's
// fma chain in increasing k. Check: ctest -R 'Kernels'.
#include <cmath>
#include <vector>

#include "kernels/cpu/avx2_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx2 {

float CanonicalDot(const float* a, const float* b, int64_t n) {
  alignas(32) float lane[32] = {};
  const int64_t full_blocks = n / 32;
  int64_t block = 0;
  // Eight consecutive whole blocks at a time (blocks 8g..8g+7 belong to lanes
  // (8g % 32)..+7): transpose so one register holds element i of each block, and run
  // the eight lanes' fma chains side by side.
  for (; block + 8 <= full_blocks; block += 8) {
    __m256 acc = _mm256_load_ps(lane + canonical::LaneOfBlock(block));
    for (int64_t i = 0; i < 32; i += 8) {
      __m256 va[8], vb[8];
      for (int q = 0; q < 8; ++q) {
        va[q] = _mm256_loadu_ps(a + (block + q) * 32 + i);
        vb[q] = _mm256_loadu_ps(b + (block + q) * 32 + i);
      }
      Transpose8x8(va);
      Transpose8x8(vb);
      for (int t = 0; t < 8; ++t) acc = canonical::ChainStep<Arith>(acc, va[t], vb[t]);
    }
    _mm256_store_ps(lane + canonical::LaneOfBlock(block), acc);
  }
  // The remaining blocks come after every block above, so each lane's chain stays in
  // increasing k.
  canonical::DotTail(lane, a, b, block * 32, n);
  return canonical::FoldLanes(lane);
}

void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps,
             float* out) {
  RmsNormRows(x, M, n, weight, eps, out, CanonicalDot,
              [](const float* xr, float inv, const float* w, float* orow, int64_t len) {
                const __m256 vinv = _mm256_set1_ps(inv);
                int64_t i = 0;
                for (; i + 8 <= len; i += 8) {
                  _mm256_storeu_ps(orow + i,
                                   canonical::RmsScale<Arith>(_mm256_loadu_ps(xr + i), vinv,
                                                              _mm256_loadu_ps(w + i)));
                }
                for (; i < len; ++i) orow[i] = canonical::RmsScale(xr[i], inv, w[i]);
              });
}

namespace {
template <DType D>
void EmbeddingRows(const WeightView& table, const int32_t* ids, int64_t M, float* out) {
  const int64_t D_ = table.cols;
  for (int64_t m = 0; m < M; ++m) {
    const int64_t base = static_cast<int64_t>(ids[m]) * D_;
    float* o = out + m * D_;
    int64_t i = 0;
    for (; i + 8 <= D_; i += 8) _mm256_storeu_ps(o + i, LoadWeights8<D>(table.data, base + i));
    for (; i < D_; ++i) o[i] = WeightAt(table, ids[m], i);
  }
}
}  // namespace

void Embedding(const WeightView& table, const int32_t* ids, int64_t M, float* out) {
  if (table.layout != WeightLayout::kRowMajor) return ref::Embedding(table, ids, M, out);
  switch (table.dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return ref::Embedding(table, ids, M, out);
    case DType::kF32:
      return EmbeddingRows<DType::kF32>(table, ids, M, out);
    case DType::kBF16:
      return EmbeddingRows<DType::kBF16>(table, ids, M, out);
    case DType::kF16:
      return EmbeddingRows<DType::kF16>(table, ids, M, out);
  }
}

void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table) {
  RopeHeads(x, M, n_heads, head_dim, positions, cos_table, sin_table,
            [](float* v, const float* c, const float* s, int64_t half) {
              int64_t i = 0;
              for (; i + 8 <= half; i += 8) {
                __m256 y1, y2;
                canonical::RopeRotate<Arith>(_mm256_loadu_ps(v + i), _mm256_loadu_ps(v + i + half),
                                             _mm256_loadu_ps(c + i), _mm256_loadu_ps(s + i), &y1,
                                             &y2);
                _mm256_storeu_ps(v + i, y1);
                _mm256_storeu_ps(v + i + half, y2);
              }
              for (; i < half; ++i) {
                canonical::RopeRotate(v[i], v[i + half], c[i], s[i], &v[i], &v[i + half]);
              }
            });
}

namespace {
// An elementwise op of (gate, up): 8 elements at a time through Vec (a canonical template with
// avx2::Arith), the tail through One (the same template, scalar).
template <__m256 (*Vec)(__m256, __m256), float (*One)(float, float)>
void GatedElementwise(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, Vec(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = One(gate[i], up[i]);
}
}  // namespace

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  GatedElementwise<canonical::SiluMul<Arith>, canonical::SiluMul<>>(gate, up, n, out);
}

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  GatedElementwise<canonical::GeluTanhMul<Arith>, canonical::GeluTanhMul<>>(gate, up, n, out);
}

void Add(const float* a, const float* b, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, Arith::Add(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) y[i] = canonical::Add(a[i], b[i]);
}

void Exp8(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, Arith::Exp(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) out[i] = canonical::Exp(x[i]);
}

}  // namespace trace::kernels::avx2
