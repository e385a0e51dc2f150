// Reference: Attention for one query row (docs/numerics.md, "Attention").
// Shapes: q [n_heads, d], k/v cache [>= pos + 1, n_kv_heads, d], out [n_heads, d];
// scratch >= 2 * (pos + 1) floats. Variants: canonical (two passes: exact max, Exp, the
// canonical sum and dots over positions 0..pos) and fast (online softmax). The dispatch
// passes a head range [h_begin, h_end). Check: ctest -R 'KernelsAttention'.
#include <cmath>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::ref {

void AttentionCanonical(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* scratch, float* out, int64_t h_begin, int64_t h_end) {
  const int64_t n_pos = pos + 1;
  const int64_t group = n_heads / n_kv_heads;
  const int64_t kv_stride = n_kv_heads * head_dim;
  float* p = scratch;               // [n_pos]: scores, then probabilities
  float* column = scratch + n_pos;  // [n_pos]: v_j[d] for j = 0..pos
  for (int64_t h = h_begin; h < h_end; ++h) {
    const float* qh = q + h * head_dim;
    const int64_t kvh = h / group;
    for (int64_t j = 0; j < n_pos; ++j) {
      p[j] = canonical::ScaleScore(
          canonical::Dot(qh, k_cache + j * kv_stride + kvh * head_dim, head_dim), scale);
    }
    const float mx = canonical::Max(p, n_pos);
    for (int64_t j = 0; j < n_pos; ++j) p[j] = canonical::Probability(p[j], mx);
    const float sum = canonical::Sum(p, n_pos);
    for (int64_t d = 0; d < head_dim; ++d) {
      for (int64_t j = 0; j < n_pos; ++j) column[j] = v_cache[j * kv_stride + kvh * head_dim + d];
      out[h * head_dim + d] = canonical::Normalize(canonical::Dot(p, column, n_pos), sum);
    }
  }
}

void AttentionFast(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                   int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale, float* out,
                   int64_t h_begin, int64_t h_end) {
  const int64_t group = n_heads / n_kv_heads;
  const int64_t kv_stride = n_kv_heads * head_dim;
  thread_local std::vector<float> acc;
  acc.resize(static_cast<size_t>(head_dim));
  for (int64_t h = h_begin; h < h_end; ++h) {
    const float* qh = q + h * head_dim;
    const int64_t kvh = h / group;
    float running_max = -INFINITY;
    float denom = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) acc[d] = 0.0f;
    for (int64_t j = 0; j <= pos; ++j) {
      const float* kj = k_cache + j * kv_stride + kvh * head_dim;
      const float* vj = v_cache + j * kv_stride + kvh * head_dim;
      float s = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) s = std::fma(qh[d], kj[d], s);
      s = s * scale;
      if (s > running_max) {
        const float correction = Exp(running_max - s);
        denom = denom * correction;
        for (int64_t d = 0; d < head_dim; ++d) acc[d] = acc[d] * correction;
        running_max = s;
      }
      const float p = Exp(s - running_max);
      denom = denom + p;
      for (int64_t d = 0; d < head_dim; ++d) acc[d] = std::fma(p, vj[d], acc[d]);
    }
    for (int64_t d = 0; d < head_dim; ++d) out[h * head_dim + d] = acc[d] / denom;
  }
}

}  // namespace trace::kernels::ref
