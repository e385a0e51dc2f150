// AVX-512 RmsNorm: the sum of squares by avx512::CanonicalDot, the inverse by
// canonical::RmsInverse, then (x * inv) * w 16 elements at a time through
// canonical::RmsScale<avx512::Arith> (the tail masked). Equals ref::RmsNorm bit for bit.
// Shapes as ref::RmsNorm (x and out may alias). Check: ctest -R 'KernelsRmsNorm'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps,
             float* out) {
  RmsNormRows(x, M, n, weight, eps, out, CanonicalDot,
              [](const float* xr, float inv, const float* w, float* orow, int64_t len) {
                const __m512 vinv = _mm512_set1_ps(inv);
                for (int64_t i = 0; i < len; i += 16) {
                  const __mmask16 mask = FirstLanes(len - i);
                  _mm512_mask_storeu_ps(
                      orow + i, mask,
                      canonical::RmsScale<Arith>(_mm512_maskz_loadu_ps(mask, xr + i), vinv,
                                                 _mm512_maskz_loadu_ps(mask, w + i)));
                }
              });
}

}  // namespace trace::kernels::avx512
