// AVX2 Attention for one query row. Canonical: scores for 8 positions at once (the 8 key
// rows transposed so each register holds element d of 8 keys; each position keeps its
// lane chains in increasing d), the exact max, the vectorised engine Exp, the canonical
// sum, and the weighted sum of V vectorised across d with lane (j / 32) % 32 per
// position; every rounding and fold through kernels/canonical.h (avx2::Arith for the
// vectors). Equals ref::AttentionCanonical bit for bit. Fast: online softmax.
// Shapes as kernels/kernels.h. Check: ctest -R 'KernelsAttention'.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/avx2_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx2 {

void AttentionCanonical(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* scratch, float* out, int64_t h_begin, int64_t h_end) {
  if (head_dim % 8 != 0) {
    return ref::AttentionCanonical(q, k_cache, v_cache, pos, n_heads, n_kv_heads, head_dim, scale,
                                   scratch, out, h_begin, h_end);
  }
  const int64_t n_pos = pos + 1;
  const int64_t group = n_heads / n_kv_heads;
  const int64_t kv_stride = n_kv_heads * head_dim;
  const int64_t chunks = head_dim / 8;
  thread_local std::vector<float> acc;  // [32 lanes][head_dim]
  acc.resize(static_cast<size_t>(32 * head_dim));
  float* p = scratch;
  for (int64_t h = h_begin; h < h_end; ++h) {
    const float* qh = q + h * head_dim;
    const int64_t kvh = h / group;
    const float* kh = k_cache + kvh * head_dim;
    const float* vh = v_cache + kvh * head_dim;
    // Scores.
    int64_t j = 0;
    for (; j + 8 <= n_pos; j += 8) {
      __m256 lanes[32];
      for (int l = 0; l < 32; ++l) lanes[l] = _mm256_setzero_ps();
      for (int64_t d = 0; d < head_dim; d += 8) {
        __m256 r[8];
        for (int t = 0; t < 8; ++t) r[t] = _mm256_loadu_ps(kh + (j + t) * kv_stride + d);
        Transpose8x8(r);
        __m256& lane = lanes[canonical::LaneOfElement(d)];
        for (int i = 0; i < 8; ++i)
          lane = canonical::ChainStep<Arith>(lane, _mm256_broadcast_ss(qh + d + i), r[i]);
      }
      _mm256_storeu_ps(p + j, canonical::ScaleScore<Arith>(canonical::FoldLanes<Arith>(lanes),
                                                           _mm256_set1_ps(scale)));
    }
    for (; j < n_pos; ++j) {
      p[j] = canonical::ScaleScore(canonical::Dot(qh, kh + j * kv_stride, head_dim), scale);
    }
    // Softmax numerator.
    const float mx = canonical::Max(p, n_pos);
    const __m256 vmx = _mm256_set1_ps(mx);
    int64_t i = 0;
    for (; i + 8 <= n_pos; i += 8) {
      _mm256_storeu_ps(p + i, canonical::Probability<Arith>(_mm256_loadu_ps(p + i), vmx));
    }
    for (; i < n_pos; ++i) p[i] = canonical::Probability(p[i], mx);
    const float denom = canonical::Sum(p, n_pos);
    // Weighted sum of V: lane (j / 32) % 32 of output element d gets fma(p_j, v_j[d]).
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t jj = 0; jj < n_pos; ++jj) {
      float* lane = acc.data() + canonical::LaneOfElement(jj) * head_dim;
      const __m256 pj = _mm256_set1_ps(p[jj]);
      const float* vj = vh + jj * kv_stride;
      for (int64_t d = 0; d < head_dim; d += 8) {
        _mm256_storeu_ps(lane + d, canonical::ChainStep<Arith>(_mm256_loadu_ps(lane + d), pj,
                                                               _mm256_loadu_ps(vj + d)));
      }
    }
    const __m256 vdenom = _mm256_set1_ps(denom);
    for (int64_t c = 0; c < chunks; ++c) {
      __m256 sum = _mm256_loadu_ps(acc.data() + c * 8);
      for (int l = 1; l < canonical::kLanes; ++l) {
        sum = canonical::FoldStep<Arith>(sum, _mm256_loadu_ps(acc.data() + l * head_dim + c * 8));
      }
      _mm256_storeu_ps(out + h * head_dim + c * 8, canonical::Normalize<Arith>(sum, vdenom));
    }
  }
}

void AttentionFast(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                   int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale, float* out,
                   int64_t h_begin, int64_t h_end) {
  if (head_dim % 8 != 0) {
    return ref::AttentionFast(q, k_cache, v_cache, pos, n_heads, n_kv_heads, head_dim, scale, out,
                              h_begin, h_end);
  }
  const int64_t group = n_heads / n_kv_heads;
  const int64_t kv_stride = n_kv_heads * head_dim;
  const int64_t chunks = head_dim / 8;
  thread_local std::vector<float> acc;
  acc.resize(static_cast<size_t>(head_dim));
  for (int64_t h = h_begin; h < h_end; ++h) {
    const float* qh = q + h * head_dim;
    const int64_t kvh = h / group;
    float running_max = -INFINITY;
    float denom = 0.0f;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = 0; j <= pos; ++j) {
      const float* kj = k_cache + j * kv_stride + kvh * head_dim;
      const float* vj = v_cache + j * kv_stride + kvh * head_dim;
      __m256 dot = _mm256_setzero_ps();
      for (int64_t c = 0; c < chunks; ++c) {
        dot = _mm256_fmadd_ps(_mm256_loadu_ps(qh + c * 8), _mm256_loadu_ps(kj + c * 8), dot);
      }
      const float s = HorizontalSum(dot) * scale;
      if (s > running_max) {
        const float correction = kernels::Exp(running_max - s);
        denom = denom * correction;
        const __m256 vc = _mm256_set1_ps(correction);
        for (int64_t d = 0; d < head_dim; d += 8) {
          _mm256_storeu_ps(acc.data() + d, _mm256_mul_ps(_mm256_loadu_ps(acc.data() + d), vc));
        }
        running_max = s;
      }
      const float pj = kernels::Exp(s - running_max);
      denom = denom + pj;
      const __m256 vp = _mm256_set1_ps(pj);
      for (int64_t c = 0; c < chunks; ++c) {
        _mm256_storeu_ps(acc.data() + c * 8, _mm256_fmadd_ps(vp, _mm256_loadu_ps(vj + c * 8),
                                                             _mm256_loadu_ps(acc.data() + c * 8)));
      }
    }
    const __m256 vd = _mm256_set1_ps(denom);
    for (int64_t c = 0; c < chunks; ++c) {
      _mm256_storeu_ps(out + h * head_dim + c * 8,
                       _mm256_div_ps(_mm256_loadu_ps(acc.data() + c * 8), vd));
    }
  }
}

}  // namespace trace::kernels::avx2
