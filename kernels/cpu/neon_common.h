// Internal to trace_kernels, included only by kernels/cpu/neon_*.cc (built for aarch64, where
// Advanced SIMD is part of the architecture): the 4-wide arithmetic type `Arith` through which
// the canonical paths run the templates of kernels/canonical.h (so each rounding is the scalar
// reference's), weight loads that convert exactly to f32, and a 4x4 transpose.
//
// Why NEON needs care: GCC's arm_neon.h writes vaddq_f32 / vmulq_f32 as plain `a + b`, `a * b`,
// so under GCC's default -ffp-contract=fast on aarch64 a Mul feeding an Add would become one
// fmla (one rounding instead of two). trace_kernels builds with -ffp-contract=off, and
// tests/arm64/check.sh --contract-fma shows that the digests catch a build without it.
//
// Ownership: none. Thread safety: pure functions. Errors: none.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::kernels::neon {

// 4 consecutive weights from element `index` of a dtype array, as exact f32.
template <DType D>
inline float32x4_t LoadWeights4(const void* base, int64_t index) {
  if constexpr (D == DType::kF32) {
    return vld1q_f32(static_cast<const float*>(base) + index);
  } else if constexpr (D == DType::kBF16) {
    const uint16x4_t h = vld1_u16(static_cast<const uint16_t*>(base) + index);
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
  } else {
    const uint16x4_t h = vld1_u16(static_cast<const uint16_t*>(base) + index);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
  }
}

// r[i][j] <- r[j][i].
inline void Transpose4x4(float32x4_t r[4]) {
  const float32x4x2_t t01 = vtrnq_f32(r[0], r[1]);  // a0 b0 a2 b2 | a1 b1 a3 b3
  const float32x4x2_t t23 = vtrnq_f32(r[2], r[3]);  // c0 d0 c2 d2 | c1 d1 c3 d3
  r[0] = vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0]));
  r[1] = vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1]));
  r[2] = vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0]));
  r[3] = vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1]));
}

// The arithmetic type of kernels/canonical.h on 4 floats: each member is one AArch64
// instruction with the scalar operation's rounding (fmla is one rounding, like std::fma;
// fdiv and fsqrt are correctly rounded, as IEEE requires).
struct Arith {
  using V = float32x4_t;
  using I = int32x4_t;
  static V Set1(float c) { return vdupq_n_f32(c); }
  static V Fma(V a, V b, V c) { return vfmaq_f32(c, a, b); }  // c + a * b, fused
  static V Add(V a, V b) { return vaddq_f32(a, b); }
  static V Sub(V a, V b) { return vsubq_f32(a, b); }
  static V Mul(V a, V b) { return vmulq_f32(a, b); }
  static V Div(V a, V b) { return vdivq_f32(a, b); }
  static V Sqrt(V a) { return vsqrtq_f32(a); }
  static V Neg(V a) { return vnegq_f32(a); }  // flips the sign bit only
  static I ToInt(V integral) { return vcvtnq_s32_f32(integral); }
  static I HalfFloor(I i) { return vshrq_n_s32(i, 1); }  // arithmetic shift
  static I SubInt(I a, I b) { return vsubq_s32(a, b); }
  static V Pow2(I e) {
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(e, vdupq_n_s32(127)), 23));
  }
  // v > mx ? v : mx, NaN included (fmax would return the NaN: not the contract's step).
  static V MaxStep(V mx, V v) { return vbslq_f32(vcgtq_f32(v, mx), v, mx); }
  // canonical::Exp on 4 lanes: ExpCore everywhere, then the special cases selected in the
  // scalar definition's order (overflow, zero, NaN).
  static V Exp(V x) {
    V result = canonical::ExpCore<Arith>(x);
    result = vbslq_f32(vcgtq_f32(x, vdupq_n_f32(canonical::kExpOverflowAbove)),
                       vdupq_n_f32(canonical::PlusInfinity()), result);
    result =
        vbslq_f32(vcltq_f32(x, vdupq_n_f32(canonical::kExpZeroBelow)), vdupq_n_f32(0.0f), result);
    return vbslq_f32(vceqq_f32(x, x), result, x);
  }
};

}  // namespace trace::kernels::neon
