// AVX-512 GeluTanhMul: out = gelu_tanh(gate) * up, 16 elements at a time through
// canonical::GeluTanhMul<avx512::Arith> (the vector Exp of avx512::Arith), the tail masked.
// Equals ref::GeluTanhMul bit for bit. Check: ctest -R 'KernelsGeluTanhMul'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  GatedElementwise<canonical::GeluTanhMul<Arith>>(gate, up, n, out);
}

}  // namespace trace::kernels::avx512
