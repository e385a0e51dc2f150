// Internal to trace_kernels, included only by kernels/cpu/avx512_*.cc (built with
// -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c): the 16-wide arithmetic
// type `Arith` through which the canonical AVX-512 paths run the templates of
// kernels/canonical.h (each member one instruction with the scalar operation's rounding),
// and weight loads that convert exactly to f32. The contract's 32 lanes map onto two
// 16-wide registers; the kernels vectorise across output columns, never along a chain.
//
// Ownership: none. Thread safety: pure functions. Errors: none.
#pragma once

#include <immintrin.h>

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

// The arithmetic type of kernels/canonical.h on 16 floats (the members the MatMul needs:
// the chain's fma and the fold's add; vfmadd is one rounding, like std::fma).
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
};

}  // namespace trace::kernels::avx512
