// Reference: RmsNorm. out[m, i] = (x[m, i] * inv) * f32(weight[i]),
// inv = 1.0f / sqrtf(CanonicalDot(x[m], x[m], n) / (float)n + eps).
// Shapes: x, out [M, n] f32 (may alias), weight [n] bf16|f16|f32. One variant (the fast
// mode uses the same arithmetic: it is not a hot spot). Check: ctest -R 'KernelsRmsNorm'.
#include <cmath>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::ref {

void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps,
             float* out) {
  thread_local std::vector<float> w;
  w.resize(static_cast<size_t>(n));
  WeightRowToF32(weight, 0, n, w.data());
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * n;
    float* orow = out + m * n;
    const float sum_sq = CanonicalDot(xr, xr, n);
    const float inv = canonical::RmsInverse(sum_sq, n, eps);
    for (int64_t i = 0; i < n; ++i) orow[i] = canonical::RmsScale(xr[i], inv, w[i]);
  }
}

}  // namespace trace::kernels::ref
