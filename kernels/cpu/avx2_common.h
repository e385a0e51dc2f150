// Internal to trace_kernels, included only by kernels/cpu/avx2_*.cc (built with -mavx2
// -mfma -mf16c): the 8-wide arithmetic type `Arith` through which the canonical paths run
// the templates of kernels/canonical.h (so each rounding is the scalar reference's), weight
// loads that convert exactly to f32, an 8x8 transpose, and the vectorised engine Exp.
//
// Ownership: none. Thread safety: pure functions. Errors: none.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::kernels::avx2 {

// 8 consecutive weights from element `index` of a dtype array, as exact f32.
template <DType D>
inline __m256 LoadWeights8(const void* base, int64_t index) {
  if constexpr (D == DType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + index);
  } else if constexpr (D == DType::kBF16) {
    const __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    const __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + index));
    return _mm256_cvtph_ps(h);
  }
}

// r[i][j] <- r[j][i].
inline void Transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]);
  const __m256 t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]);
  const __m256 t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]);
  const __m256 t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]);
  const __m256 t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// The arithmetic type of kernels/canonical.h on 8 floats: each member is one AVX2
// instruction with the scalar operation's rounding (vfmadd is one rounding, like std::fma).
struct Arith {
  using V = __m256;
  using I = __m256i;
  static V Set1(float c) { return _mm256_set1_ps(c); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm256_div_ps(a, b); }
  static V Sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V Neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static I ToInt(V integral) { return _mm256_cvtps_epi32(integral); }
  static I HalfFloor(I i) { return _mm256_srai_epi32(i, 1); }
  static I SubInt(I a, I b) { return _mm256_sub_epi32(a, b); }
  static V Pow2(I e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  }
  // v > mx ? v : mx: maxps returns its second operand when either is NaN.
  static V MaxStep(V mx, V v) { return _mm256_max_ps(v, mx); }
  // canonical::Exp on 8 lanes: ExpCore everywhere, then the special cases blended in the
  // scalar definition's order (overflow, zero, NaN).
  static V Exp(V x) {
    V result = canonical::ExpCore<Arith>(x);
    result = _mm256_blendv_ps(
        result, _mm256_set1_ps(canonical::PlusInfinity()),
        _mm256_cmp_ps(x, _mm256_set1_ps(canonical::kExpOverflowAbove), _CMP_GT_OQ));
    result =
        _mm256_blendv_ps(result, _mm256_setzero_ps(),
                         _mm256_cmp_ps(x, _mm256_set1_ps(canonical::kExpZeroBelow), _CMP_LT_OQ));
    return _mm256_blendv_ps(result, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
};

inline __m256 Exp(__m256 x) {
  return Arith::Exp(x);
}

// Horizontal sum for the fast paths (order: pairwise within the register).
inline float HorizontalSum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace trace::kernels::avx2
