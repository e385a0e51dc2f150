// Reference: Add, y[i] = a[i] + b[i]. Shapes: [n] f32 each (y may alias a or b).
// Check: ctest -R 'KernelsAdd'.
#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::ref {

void Add(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = canonical::Add(a[i], b[i]);
}

}  // namespace trace::kernels::ref
