// AVX-512 SiluMul: out = (g / (1 + Exp(-g))) * up, 16 elements at a time through
// canonical::SiluMul<avx512::Arith> (the vector Exp of avx512::Arith), the tail masked.
// Equals ref::SiluMul bit for bit. Check: ctest -R 'KernelsSiluMul'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  GatedElementwise<canonical::SiluMul<Arith>>(gate, up, n, out);
}

}  // namespace trace::kernels::avx512
