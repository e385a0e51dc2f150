// Internal to trace_kernels, included only by kernels/cpu/avx2_*.cc (built with -mavx2
// -mfma -mf16c): weight loads that convert exactly to f32, an 8x8 transpose, and the
// vectorised engine Exp that equals the scalar Exp (kernels/cpu/ref_exp.cc) bit for bit.
//
// Ownership: none. Thread safety: pure functions. Errors: none.
#pragma once

#include <immintrin.h>

#include <cstdint>

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

// The engine Exp on 8 lanes; the same operations as kernels/cpu/ref_exp.cc in the same
// order, with the special cases applied as blends at the end.
inline __m256 Exp(__m256 x) {
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(0x1.715476p+0f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-0x1.62e430p-1f), x);
  r = _mm256_fmadd_ps(k, _mm256_set1_ps(0x1.05c610p-29f), r);
  __m256 p = _mm256_set1_ps(0x1.a01a02p-13f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.6c16c2p-10f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.111112p-7f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.555556p-5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.555556p-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.0p-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.0p+0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0x1.0p+0f));
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i k1 = _mm256_srai_epi32(ki, 1);
  const __m256i k2 = _mm256_sub_epi32(ki, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  __m256 result = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  result = _mm256_blendv_ps(result, _mm256_set1_ps(__builtin_inff()),
                            _mm256_cmp_ps(x, _mm256_set1_ps(0x1.62e42ep+6f), _CMP_GT_OQ));
  result = _mm256_blendv_ps(result, _mm256_setzero_ps(),
                            _mm256_cmp_ps(x, _mm256_set1_ps(-0x1.ap+6f), _CMP_LT_OQ));
  result = _mm256_blendv_ps(result, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return result;
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
