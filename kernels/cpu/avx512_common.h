// Internal to trace_kernels, included only by kernels/cpu/avx512_*.cc (built with
// -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c): the 16-wide arithmetic
// type `Arith` through which the canonical AVX-512 paths run the templates of
// kernels/canonical.h (each member one instruction with the scalar operation's rounding),
// and weight loads that convert exactly to f32. The contract's 32 lanes map onto two
// 16-wide registers; the kernels vectorise across output columns, never along a chain.
//
// Ownership: none. Thread safety: pure functions. Errors: none.
#pragma once

// GCC 12's AVX-512 intrinsics leave a dummy operand uninitialised and, once inlined, warn
// about it in their own header (GCC PR 105593, fixed in GCC 13): silenced for that header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::kernels::avx512 {

// 16 consecutive weights from element `index` of a dtype array, as exact f32 (bf16 is the
// high half of an f32; vcvtph2ps converts every half exactly, subnormals and NaN included).
template <DType D>
inline __m512 LoadWeights16(const void* base, int64_t index) {
  if constexpr (D == DType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(base) + index);
  } else if constexpr (D == DType::kBF16) {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + index));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(base) + index));
    return _mm512_cvtph_ps(h);
  }
}

// The arithmetic type of kernels/canonical.h on 16 floats: each member is one AVX-512
// instruction with the scalar operation's rounding (vfmadd is one rounding, like std::fma),
// so ExpCore<Arith>, SiluMul<Arith>, RopeRotate<Arith>, ... perform per element exactly the
// scalar operations (the members are avx2::Arith's, twice as wide).
struct Arith {
  using V = __m512;
  using I = __m512i;
  static V Set1(float c) { return _mm512_set1_ps(c); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V Div(V a, V b) { return _mm512_div_ps(a, b); }
  static V Sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V Neg(V a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
  static I ToInt(V integral) { return _mm512_cvtps_epi32(integral); }
  static I HalfFloor(I i) { return _mm512_srai_epi32(i, 1); }
  static I SubInt(I a, I b) { return _mm512_sub_epi32(a, b); }
  static V Pow2(I e) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23));
  }
  // v > mx ? v : mx: vmaxps returns its second operand when either is NaN.
  static V MaxStep(V mx, V v) { return _mm512_max_ps(v, mx); }
  // canonical::Exp on 16 lanes: ExpCore everywhere, then the special cases blended in the
  // scalar definition's order (overflow, zero, NaN).
  static V Exp(V x) {
    V result = canonical::ExpCore<Arith>(x);
    result = _mm512_mask_mov_ps(
        result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(canonical::kExpOverflowAbove), _CMP_GT_OQ),
        _mm512_set1_ps(canonical::PlusInfinity()));
    result = _mm512_mask_mov_ps(
        result, _mm512_cmp_ps_mask(x, _mm512_set1_ps(canonical::kExpZeroBelow), _CMP_LT_OQ),
        _mm512_setzero_ps());
    return _mm512_mask_mov_ps(result, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
  }
};

// The mask of the first `n` of 16 elements (n clamped to [0, 16]): the tails of the
// element-wise ops run the same vector code on a masked load and store.
inline __mmask16 FirstLanes(int64_t n) {
  return n >= 16  ? static_cast<__mmask16>(0xffff)
         : n <= 0 ? static_cast<__mmask16>(0)
                  : static_cast<__mmask16>((1u << n) - 1u);
}

// 16 weights as LoadWeights16, only the elements of `mask` read (the others are +0).
template <DType D>
inline __m512 MaskLoadWeights16(const void* base, int64_t index, __mmask16 mask) {
  if constexpr (D == DType::kF32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(base) + index);
  } else if constexpr (D == DType::kBF16) {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(base) + index);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(base) + index);
    return _mm512_cvtph_ps(h);
  }
}

// r[i][j] <- r[j][i] for a 16x16 block of floats (unpack, shuffle, two 128-bit permutes).
inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // r[4a + b] now holds, in 128-bit lane L, elements 4L..4L+3 of column b of rows 4a..4a+3
  // (column b of the 4x4 sub-block (a, L)). Gather the four sub-blocks of a column.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);      // lanes 0, 2 of r[i], r[4+i]
    t[4 + i] = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);  // lanes 1, 3
    t[8 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xdd);
    r[4 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0x88);
    r[12 + i] = _mm512_shuffle_f32x4(t[4 + i], t[12 + i], 0xdd);
  }
}

// An elementwise op of (gate, up), 16 elements at a time through `Op` (a canonical template
// instantiated with avx512::Arith: SiluMul, GeluTanhMul), the tail masked.
template <__m512 (*Op)(__m512, __m512)>
void GatedElementwise(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 mask = FirstLanes(n - i);
    _mm512_mask_storeu_ps(
        out + i, mask,
        Op(_mm512_maskz_loadu_ps(mask, gate + i), _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

}  // namespace trace::kernels::avx512
