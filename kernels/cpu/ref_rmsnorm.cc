// Reference: RmsNorm. out[m, i] = (x[m, i] * inv) * f32(weight[i]),
// inv = 1.0f / sqrtf(CanonicalDot(x[m], x[m], n) / (float)n + eps).
// Shapes: x, out [M, n] f32 (may alias), weight [n] bf16|f16|f32. One variant (the fast
// mode uses the same arithmetic: it is not a hot spot). Check: ctest -R 'KernelsRmsNorm'.
#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::ref {

void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps,
             float* out) {
  RmsNormRows(x, M, n, weight, eps, out, CanonicalDot,
              [](const float* xr, float inv, const float* w, float* orow, int64_t len) {
                for (int64_t i = 0; i < len; ++i) orow[i] = canonical::RmsScale(xr[i], inv, w[i]);
              });
}

}  // namespace trace::kernels::ref
