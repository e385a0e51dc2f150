// AVX-512 RmsNorm: the sum of squares by avx512::CanonicalDot, the inverse by
// canonical::RmsInverse, then (x * inv) * w 16 elements at a time through
// canonical::RmsScale<avx512::Arith> (the tail masked). Equals ref::RmsNorm bit for bit.
// Shapes as ref::RmsNorm (x and out may alias). Check: ctest -R 'KernelsRmsNorm'.
#include <vector>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps,
             float* out) {
  thread_local std::vector<float> w;
  w.resize(static_cast<size_t>(n));
  WeightRowToF32(weight, 0, n, w.data());
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * n;
    float* orow = out + m * n;
    const __m512 inv = _mm512_set1_ps(canonical::RmsInverse(CanonicalDot(xr, xr, n), n, eps));
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 mask = FirstLanes(n - i);
      _mm512_mask_storeu_ps(orow + i, mask,
                            canonical::RmsScale<Arith>(_mm512_maskz_loadu_ps(mask, xr + i), inv,
                                                       _mm512_maskz_loadu_ps(mask, w.data() + i)));
    }
  }
}

}  // namespace trace::kernels::avx512
