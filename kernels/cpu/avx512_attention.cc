// AVX-512 canonical Attention for one query row (docs/numerics.md, "Attention"). The query
// heads that share a kv head (GQA) run together, so each key row is loaded and transposed
// once for all of them and each block of value rows is read while it is in L1. Scores for
// 16 positions at once: the 16 key rows are transposed 16x16 so that one register holds
// element d of 16 keys, and each (head, position) keeps its lane chains in increasing d (the
// last group of fewer than 16 positions runs on zero rows, its store masked); the fold adds
// the live lanes, then the +0 of the lanes no element reaches once (adding +0 again changes
// no bit). Then the exact max (any grouping, canonical::MaxStep/MaxFinish), Exp through
// avx512::Arith, the canonical sum, and the weighted sum of V vectorised across d, one block
// of 32 positions (one lane) at a time with that lane's accumulators in registers. Every
// rounding and fold through kernels/canonical.h, so it equals ref::AttentionCanonical and
// avx2::AttentionCanonical bit for bit. head_dim not a multiple of 16 (or above 256) runs the
// AVX2 path. Fast attention stays on AVX2. Shapes as ref::AttentionCanonical.
// Check: ctest -R 'KernelsAttention|KernelsSimdPaths'.
#include <algorithm>
#include <vector>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {
namespace {

constexpr int64_t kMaxChunks = 16;  // head_dim / 16 <= 16: head_dim <= 256, <= 8 live lanes
constexpr int kMaxLiveLanes = 8;
constexpr int kMaxHeads = 8;  // query heads of one kv head run together, at most this many

// p[g][j0 .. j0 + count) = ScaleScore(Dot(q_g, k_j), scale) for the G heads q[g] (count <= 16).
void Scores16(const float* const* q, int G, const float* kh, int64_t kv_stride, int64_t head_dim,
              int64_t j0, int64_t count, __m512 scale, float* const* p) {
  const int live = static_cast<int>(canonical::NumBlocks(head_dim));
  __m512 lanes[kMaxHeads][kMaxLiveLanes];
  for (int g = 0; g < G; ++g) {
    for (int l = 0; l < live; ++l) lanes[g][l] = _mm512_setzero_ps();
  }
  for (int64_t d = 0; d < head_dim; d += 16) {
    __m512 r[16];
    for (int t = 0; t < 16; ++t) {
      r[t] = t < count ? _mm512_loadu_ps(kh + (j0 + t) * kv_stride + d) : _mm512_setzero_ps();
    }
    Transpose16x16(r);
    const int l = canonical::LaneOfElement(d);
    for (int g = 0; g < G; ++g) {
      __m512 lane = lanes[g][l];
      for (int i = 0; i < 16; ++i) {
        lane = canonical::ChainStep<Arith>(lane, _mm512_set1_ps(q[g][d + i]), r[i]);
      }
      lanes[g][l] = lane;
    }
  }
  for (int g = 0; g < G; ++g) {
    __m512 total = lanes[g][0];
    for (int l = 1; l < live; ++l) total = canonical::FoldStep<Arith>(total, lanes[g][l]);
    if (live < canonical::kLanes) total = canonical::FoldStep<Arith>(total, _mm512_setzero_ps());
    _mm512_mask_storeu_ps(p[g] + j0, FirstLanes(count), canonical::ScaleScore<Arith>(total, scale));
  }
}

// The exact max of p[0 .. n) (canonical::Max, grouped 16 wide).
float MaxOf(const float* p, int64_t n) {
  __m512 mx = _mm512_set1_ps(canonical::MaxStart());
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_mask_loadu_ps(mx, FirstLanes(n - i), p + i);
    mx = canonical::MaxStep<Arith>(mx, v);
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, mx);
  float m = canonical::MaxStart();
  for (float v : part) m = canonical::MaxStep(m, v);
  return canonical::MaxFinish(m, p[0]);
}

// lane[d] = ChainStep(lane[d], p_j, v_j[d]) for j in [begin, end) (one block of positions,
// one lane), the lane's chunks in registers when the chunk count is a template constant.
template <int kChunks>
void WeightedBlock(const float* p, const float* vh, int64_t kv_stride, int64_t begin, int64_t end,
                   int64_t chunks, float* lane) {
  const int64_t n = kChunks > 0 ? kChunks : chunks;
  __m512 a[kChunks > 0 ? kChunks : kMaxChunks];
#pragma GCC unroll 16
  for (int64_t c = 0; c < n; ++c) a[c] = _mm512_loadu_ps(lane + c * 16);
  for (int64_t j = begin; j < end; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const float* vj = vh + j * kv_stride;
#pragma GCC unroll 16
    for (int64_t c = 0; c < n; ++c) {
      a[c] = canonical::ChainStep<Arith>(a[c], pj, _mm512_loadu_ps(vj + c * 16));
    }
  }
#pragma GCC unroll 16
  for (int64_t c = 0; c < n; ++c) _mm512_storeu_ps(lane + c * 16, a[c]);
}

// G query heads h0 .. h0 + G - 1 of one kv head.
void HeadGroup(const float* q, const float* kh, const float* vh, int64_t n_pos, int64_t kv_stride,
               int64_t head_dim, float score_scale, int64_t h0, int G, float* out) {
  const int64_t chunks = head_dim / 16;
  const __m512 scale = _mm512_set1_ps(score_scale);
  thread_local std::vector<float> scores;  // [G][n_pos]
  thread_local std::vector<float> acc;     // [G][32 lanes][head_dim]
  scores.resize(static_cast<size_t>(G * n_pos));
  acc.assign(static_cast<size_t>(G * canonical::kLanes * head_dim), 0.0f);
  const float* qh[kMaxHeads];
  float* p[kMaxHeads];
  for (int g = 0; g < G; ++g) {
    qh[g] = q + (h0 + g) * head_dim;
    p[g] = scores.data() + g * n_pos;
  }
  for (int64_t j = 0; j < n_pos; j += 16) {
    Scores16(qh, G, kh, kv_stride, head_dim, j, std::min<int64_t>(16, n_pos - j), scale, p);
  }
  __m512 denom[kMaxHeads];
  for (int g = 0; g < G; ++g) {
    const __m512 mx = _mm512_set1_ps(MaxOf(p[g], n_pos));
    for (int64_t i = 0; i < n_pos; i += 16) {
      const __mmask16 mask = FirstLanes(n_pos - i);
      _mm512_mask_storeu_ps(
          p[g] + i, mask, canonical::Probability<Arith>(_mm512_maskz_loadu_ps(mask, p[g] + i), mx));
    }
    denom[g] = _mm512_set1_ps(canonical::Sum(p[g], n_pos));
  }
  // Weighted sum of V: lane (j / 32) % 32 of output element d gets fma(p_j, v_j[d]); each
  // block of 32 value rows serves every head of the group while it is in L1.
  for (int64_t b = 0; b < canonical::NumBlocks(n_pos); ++b) {
    const int64_t begin = canonical::BlockBegin(b), end = canonical::BlockEnd(b, n_pos);
    for (int g = 0; g < G; ++g) {
      float* lane = acc.data() + (g * canonical::kLanes + canonical::LaneOfBlock(b)) * head_dim;
      if (chunks == 4) {
        WeightedBlock<4>(p[g], vh, kv_stride, begin, end, chunks, lane);
      } else if (chunks == 8) {
        WeightedBlock<8>(p[g], vh, kv_stride, begin, end, chunks, lane);
      } else {
        WeightedBlock<0>(p[g], vh, kv_stride, begin, end, chunks, lane);
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    const float* lanes = acc.data() + g * canonical::kLanes * head_dim;
    for (int64_t c = 0; c < chunks; ++c) {
      __m512 sum = _mm512_loadu_ps(lanes + c * 16);
      for (int l = 1; l < canonical::kLanes; ++l) {
        sum = canonical::FoldStep<Arith>(sum, _mm512_loadu_ps(lanes + l * head_dim + c * 16));
      }
      _mm512_storeu_ps(out + (h0 + g) * head_dim + c * 16,
                       canonical::Normalize<Arith>(sum, denom[g]));
    }
  }
}

}  // namespace

void AttentionCanonical(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* scratch, float* out, int64_t h_begin, int64_t h_end) {
  if (head_dim % 16 != 0 || head_dim / 16 > kMaxChunks) {
    return avx2::AttentionCanonical(q, k_cache, v_cache, pos, n_heads, n_kv_heads, head_dim, scale,
                                    scratch, out, h_begin, h_end);
  }
  const int64_t group = n_heads / n_kv_heads;
  const int64_t kv_stride = n_kv_heads * head_dim;
  for (int64_t h = h_begin; h < h_end;) {
    // The heads of [h, h_end) that share h's kv head, at most kMaxHeads at a time.
    const int64_t kvh = h / group;
    const int64_t stop = std::min({h_end, (kvh + 1) * group, h + kMaxHeads});
    HeadGroup(q, k_cache + kvh * head_dim, v_cache + kvh * head_dim, pos + 1, kv_stride, head_dim,
              scale, h, static_cast<int>(stop - h), out);
    h = stop;
  }
}

}  // namespace trace::kernels::avx512
