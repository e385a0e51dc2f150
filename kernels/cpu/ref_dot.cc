// Reference: CanonicalDot / CanonicalSum (docs/numerics.md, "Dot product").
// Shapes: two f32 vectors of length n >= 0. Variants: dot (fma chains) and sum (adds).
// Check: build/bin ctest -R 'KernelsDot' (tests/kernels/dot_test.cc compares against a
// float64 reference and the AVX2 path bit for bit).
#include "kernels/kernels.h"

#include <cmath>

namespace trace::kernels {

namespace {
constexpr int64_t kLanes = 32;
constexpr int64_t kBlock = 32;
}  // namespace

float CanonicalDot(const float* a, const float* b, int64_t n) {
  float lane[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lane[l] = 0.0f;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t l = (k / kBlock) % kLanes;
    lane[l] = std::fma(a[k], b[k], lane[l]);
  }
  float result = lane[0];
  for (int64_t l = 1; l < kLanes; ++l) result = result + lane[l];
  return result;
}

float CanonicalSum(const float* a, int64_t n) {
  float lane[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lane[l] = 0.0f;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t l = (k / kBlock) % kLanes;
    lane[l] = lane[l] + a[k];
  }
  float result = lane[0];
  for (int64_t l = 1; l < kLanes; ++l) result = result + lane[l];
  return result;
}

}  // namespace trace::kernels
