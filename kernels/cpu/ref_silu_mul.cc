// Reference: SiluMul, out[i] = (gate[i] / (1.0f + Exp(-gate[i]))) * up[i]
// (canonical::SiluMul). Shapes: gate, up, out [n] f32 (out may alias gate).
// Check: ctest -R 'KernelsSiluMul'.
#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::ref {

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = canonical::SiluMul(gate[i], up[i]);
}

}  // namespace trace::kernels::ref
