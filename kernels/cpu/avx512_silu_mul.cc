// AVX-512 SiluMul: out = (g / (1 + Exp(-g))) * up, 16 elements at a time through
// canonical::SiluMul<avx512::Arith> (the vector Exp of avx512::Arith), the tail masked.
// Equals ref::SiluMul bit for bit. Check: ctest -R 'KernelsSiluMul'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = FirstLanes(n - i);
    _mm512_mask_storeu_ps(out + i, mask,
                          canonical::SiluMul<Arith>(_mm512_maskz_loadu_ps(mask, gate + i),
                                                    _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

}  // namespace trace::kernels::avx512
