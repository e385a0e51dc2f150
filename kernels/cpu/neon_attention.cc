// NEON canonical Attention for one query row: scores for 4 positions at once (the 4 key rows
// transposed so each register holds element d of 4 keys; each position keeps its lane chains
// in increasing d), the exact max, the vectorised engine Exp, the canonical sum, and the
// weighted sum of V vectorised across d with lane (j / 32) % 32 per position; every rounding
// and fold through kernels/canonical.h (neon::Arith for the vectors). Equals
// ref::AttentionCanonical bit for bit. Fast attention runs the reference on this path.
// Shapes as kernels/kernels.h. Check: tests/arm64/check.sh (KernelsAttention under qemu).
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/neon_common.h"

namespace trace::kernels::neon {

namespace {

// p[j] = scale * dot(q, k_j) for j < n_pos, keys at k + j * kv_stride.
void Scores(const float* qh, const float* kh, int64_t kv_stride, int64_t head_dim, int64_t n_pos,
            float scale, float* p) {
  int64_t j = 0;
  for (; j + 4 <= n_pos; j += 4) {
    float32x4_t lanes[32];
    for (auto& l : lanes) l = vdupq_n_f32(0.0f);
    for (int64_t d = 0; d < head_dim; d += 4) {
      float32x4_t r[4];
      for (int t = 0; t < 4; ++t) r[t] = vld1q_f32(kh + (j + t) * kv_stride + d);
      Transpose4x4(r);
      float32x4_t& lane = lanes[canonical::LaneOfElement(d)];
      for (int i = 0; i < 4; ++i) {
        lane = canonical::ChainStep<Arith>(lane, vdupq_n_f32(qh[d + i]), r[i]);
      }
    }
    vst1q_f32(p + j,
              canonical::ScaleScore<Arith>(canonical::FoldLanes<Arith>(lanes), vdupq_n_f32(scale)));
  }
  for (; j < n_pos; ++j) {
    p[j] = canonical::ScaleScore(canonical::Dot(qh, kh + j * kv_stride, head_dim), scale);
  }
}

// p[j] <- Exp(p[j] - max p); returns the canonical sum of the results.
float SoftmaxNumerator(float* p, int64_t n_pos) {
  const float mx = canonical::Max(p, n_pos);
  const float32x4_t vmx = vdupq_n_f32(mx);
  int64_t i = 0;
  for (; i + 4 <= n_pos; i += 4) {
    vst1q_f32(p + i, canonical::Probability<Arith>(vld1q_f32(p + i), vmx));
  }
  for (; i < n_pos; ++i) p[i] = canonical::Probability(p[i], mx);
  return canonical::Sum(p, n_pos);
}

}  // namespace

void AttentionCanonical(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* scratch, float* out, int64_t h_begin, int64_t h_end) {
  if (head_dim % 4 != 0) {
    return ref::AttentionCanonical(q, k_cache, v_cache, pos, n_heads, n_kv_heads, head_dim, scale,
                                   scratch, out, h_begin, h_end);
  }
  const int64_t n_pos = pos + 1;
  const int64_t group = n_heads / n_kv_heads;
  const int64_t kv_stride = n_kv_heads * head_dim;
  thread_local std::vector<float> acc;  // [32 lanes][head_dim]
  acc.resize(static_cast<size_t>(32 * head_dim));
  float* p = scratch;
  for (int64_t h = h_begin; h < h_end; ++h) {
    const float* qh = q + h * head_dim;
    const int64_t kvh = h / group;
    const float* vh = v_cache + kvh * head_dim;
    Scores(qh, k_cache + kvh * head_dim, kv_stride, head_dim, n_pos, scale, p);
    const float denom = SoftmaxNumerator(p, n_pos);
    // Weighted sum of V: lane (j / 32) % 32 of output element d gets fma(p_j, v_j[d]).
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t j = 0; j < n_pos; ++j) {
      float* lane = acc.data() + canonical::LaneOfElement(j) * head_dim;
      const float32x4_t pj = vdupq_n_f32(p[j]);
      const float* vj = vh + j * kv_stride;
      for (int64_t d = 0; d < head_dim; d += 4) {
        vst1q_f32(lane + d,
                  canonical::ChainStep<Arith>(vld1q_f32(lane + d), pj, vld1q_f32(vj + d)));
      }
    }
    const float32x4_t vdenom = vdupq_n_f32(denom);
    for (int64_t d = 0; d < head_dim; d += 4) {
      float32x4_t sum = vld1q_f32(acc.data() + d);
      for (int l = 1; l < canonical::kLanes; ++l) {
        sum = canonical::FoldStep<Arith>(sum, vld1q_f32(acc.data() + l * head_dim + d));
      }
      vst1q_f32(out + h * head_dim + d, canonical::Normalize<Arith>(sum, vdenom));
    }
  }
}

}  // namespace trace::kernels::neon
