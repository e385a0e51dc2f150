// Reference: GeluTanhMul, out[i] = gelu_tanh(gate[i]) * up[i] with
// gelu_tanh(x) = x / (1 + Exp(-(2 sqrt(2/pi)) (x + 0.044715 x^3))) (canonical::GeluTanhMul).
// Shapes: gate, up, out [n] f32 (out may alias gate). Check: ctest -R 'KernelsGeluTanhMul'.
#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::ref {

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = canonical::GeluTanhMul(gate[i], up[i]);
}

}  // namespace trace::kernels::ref
