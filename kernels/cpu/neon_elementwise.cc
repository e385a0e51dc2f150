// NEON paths of the small ops: CanonicalDot (for RmsNorm), RmsNorm, Embedding, Rope, SiluMul,
// GeluTanhMul, Add, Exp4. Each equals its scalar reference (kernels/cpu/ref_*.cc) bit for bit:
// the elementwise ops run the templates of kernels/canonical.h with neon::Arith (the same IEEE
// operations per element) and their scalar tails the scalar ones; CanonicalDot keeps each lane's
// fma chain in increasing k. Check: tests/arm64/check.sh (the kernels' tests under qemu).
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/neon_common.h"

namespace trace::kernels::neon {

float CanonicalDot(const float* a, const float* b, int64_t n) {
  alignas(16) float lane[32] = {};
  const int64_t full_blocks = n / 32;
  int64_t block = 0;
  // Four consecutive whole blocks at a time (blocks 4g..4g+3 belong to lanes (4g % 32)..+3):
  // transpose so one register holds element i of each block, and run the four lanes' fma
  // chains side by side.
  for (; block + 4 <= full_blocks; block += 4) {
    float32x4_t acc = vld1q_f32(lane + canonical::LaneOfBlock(block));
    for (int64_t i = 0; i < 32; i += 4) {
      float32x4_t va[4], vb[4];
      for (int q = 0; q < 4; ++q) {
        va[q] = vld1q_f32(a + (block + q) * 32 + i);
        vb[q] = vld1q_f32(b + (block + q) * 32 + i);
      }
      Transpose4x4(va);
      Transpose4x4(vb);
      for (int t = 0; t < 4; ++t) acc = canonical::ChainStep<Arith>(acc, va[t], vb[t]);
    }
    vst1q_f32(lane + canonical::LaneOfBlock(block), acc);
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
                const float32x4_t vinv = vdupq_n_f32(inv);
                int64_t i = 0;
                for (; i + 4 <= len; i += 4) {
                  vst1q_f32(orow + i,
                            canonical::RmsScale<Arith>(vld1q_f32(xr + i), vinv, vld1q_f32(w + i)));
                }
                for (; i < len; ++i) orow[i] = canonical::RmsScale(xr[i], inv, w[i]);
              });
}

namespace {
template <DType D>
void EmbeddingRows(const WeightView& table, const int32_t* ids, int64_t M, float* out) {
  const int64_t cols = table.cols;
  for (int64_t m = 0; m < M; ++m) {
    const int64_t base = static_cast<int64_t>(ids[m]) * cols;
    float* o = out + m * cols;
    int64_t i = 0;
    for (; i + 4 <= cols; i += 4) vst1q_f32(o + i, LoadWeights4<D>(table.data, base + i));
    for (; i < cols; ++i) o[i] = WeightAt(table, ids[m], i);
  }
}
}  // namespace

void Embedding(const WeightView& table, const int32_t* ids, int64_t M, float* out) {
  if (table.layout != WeightLayout::kRowMajor || IsQuantized(table.dtype)) {
    return ref::Embedding(table, ids, M, out);
  }
  WithDType(table.dtype, [&](auto d) { EmbeddingRows<decltype(d)::value>(table, ids, M, out); });
}

void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table) {
  RopeHeads(x, M, n_heads, head_dim, positions, cos_table, sin_table,
            [](float* v, const float* c, const float* s, int64_t half) {
              int64_t i = 0;
              for (; i + 4 <= half; i += 4) {
                float32x4_t y1, y2;
                canonical::RopeRotate<Arith>(vld1q_f32(v + i), vld1q_f32(v + i + half),
                                             vld1q_f32(c + i), vld1q_f32(s + i), &y1, &y2);
                vst1q_f32(v + i, y1);
                vst1q_f32(v + i + half, y2);
              }
              for (; i < half; ++i) {
                canonical::RopeRotate(v[i], v[i + half], c[i], s[i], &v[i], &v[i + half]);
              }
            });
}

namespace {
// An elementwise op of (gate, up): 4 elements at a time through Vec (a canonical template with
// neon::Arith), the tail through One (the same template, scalar).
template <float32x4_t (*Vec)(float32x4_t, float32x4_t), float (*One)(float, float)>
void GatedElementwise(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, Vec(vld1q_f32(gate + i), vld1q_f32(up + i)));
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
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, Arith::Add(vld1q_f32(a + i), vld1q_f32(b + i)));
  for (; i < n; ++i) y[i] = canonical::Add(a[i], b[i]);
}

void Exp4(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, Arith::Exp(vld1q_f32(x + i)));
  for (; i < n; ++i) out[i] = canonical::Exp(x[i]);
}

}  // namespace trace::kernels::neon
