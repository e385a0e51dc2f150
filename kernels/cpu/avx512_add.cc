// AVX-512 Add: y = a + b, 16 elements at a time (one rounded add each, the tail masked).
// Equals ref::Add bit for bit. Check: ctest -R 'KernelsAdd'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void Add(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = FirstLanes(n - i);
    _mm512_mask_storeu_ps(
        y + i, mask,
        Arith::Add(_mm512_maskz_loadu_ps(mask, a + i), _mm512_maskz_loadu_ps(mask, b + i)));
  }
}

}  // namespace trace::kernels::avx512
