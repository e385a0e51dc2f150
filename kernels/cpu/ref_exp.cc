// Reference: Exp, the engine's own exp (docs/numerics.md, "Exp").
// Shapes: scalar float -> float. Variants: this scalar definition; avx2::Exp8 vectorises
// it bit for bit. Check: ctest -R 'KernelsExp' (ulp error vs std::exp in double, special
// cases, scalar vs AVX2 over every float in a wide range).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/kernels.h"

namespace trace::kernels {

float Exp(float x) {
  if (std::isnan(x)) return x;
  if (x > 0x1.62e42ep+6f) return INFINITY;  // exp(x) > FLT_MAX
  if (x < -0x1.ap+6f) return 0.0f;          // x < -104: exp(x) < 2^-150, rounds to +0
  // k = round-half-even(x * log2(e)); r = x - k*ln2 in two fma steps (Cody-Waite).
  // Adding and subtracting 1.5 * 2^23 rounds |t| < 2^22 to an integer, half to even, like
  // nearbyint (only the sign of a zero k can differ, which changes no later bit) without
  // a library call.
  const float t = x * 0x1.715476p+0f;
  const float k = (t + 0x1.8p+23f) - 0x1.8p+23f;
  float r = std::fma(k, -0x1.62e430p-1f, x);
  r = std::fma(k, 0x1.05c610p-29f, r);
  // Taylor polynomial of degree 7 for exp(r), Horner with fma.
  float p = 0x1.a01a02p-13f;
  p = std::fma(p, r, 0x1.6c16c2p-10f);
  p = std::fma(p, r, 0x1.111112p-7f);
  p = std::fma(p, r, 0x1.555556p-5f);
  p = std::fma(p, r, 0x1.555556p-3f);
  p = std::fma(p, r, 0x1.0p-1f);
  p = std::fma(p, r, 0x1.0p+0f);
  p = std::fma(p, r, 0x1.0p+0f);
  // p * 2^k as (p * 2^k1) * 2^k2, k1 = floor(k / 2), k2 = k - k1: both factors are normal
  // floats for k in [-150, 128], the first product is exact, the second rounds once.
  const int32_t ki = static_cast<int32_t>(k);
  const int32_t k1 = ki >> 1;
  const int32_t k2 = ki - k1;
  const uint32_t b1 = static_cast<uint32_t>(k1 + 127) << 23;
  const uint32_t b2 = static_cast<uint32_t>(k2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  return (p * s1) * s2;
}

}  // namespace trace::kernels
