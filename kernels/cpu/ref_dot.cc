// Reference: CanonicalDot / CanonicalSum (docs/numerics.md, "Dot product"): the 32 lane
// chains and the left fold of kernels/canonical.h.
// Shapes: two f32 vectors of length n >= 0. Variants: dot (fma chains) and sum (adds).
// Check: ctest -R 'KernelsDot|KernelsCanonical' (against a float64 reference, the contract's
// order, and the AVX2 path bit for bit).
#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::kernels {

float CanonicalDot(const float* a, const float* b, int64_t n) {
  return canonical::Dot(a, b, n);
}

float CanonicalSum(const float* a, int64_t n) {
  return canonical::Sum(a, n);
}

}  // namespace trace::kernels
