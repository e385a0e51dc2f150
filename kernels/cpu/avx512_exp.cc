// AVX-512 ExpArray: out = Exp(x), 16 elements at a time through avx512::Arith::Exp
// (canonical::ExpCore plus the special cases blended in the scalar order), the tail
// masked. Equals canonical::Exp bit for bit. Check: ctest -R 'KernelsExp'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void Exp16(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = FirstLanes(n - i);
    _mm512_mask_storeu_ps(out + i, mask, Arith::Exp(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

}  // namespace trace::kernels::avx512
