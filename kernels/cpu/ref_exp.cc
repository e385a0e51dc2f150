// Reference: Exp, the engine's own exp (docs/numerics.md, "Exp"), defined once in
// kernels/canonical.h (canonical::Exp; the SIMD paths instantiate canonical::ExpCore).
// Check: ctest -R 'KernelsExp' (ulp error vs std::exp in double, special cases, scalar vs
// AVX2 over every float in a wide range).
#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::kernels {

float Exp(float x) {
  return canonical::Exp(x);
}

}  // namespace trace::kernels
