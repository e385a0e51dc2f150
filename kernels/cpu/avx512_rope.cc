// AVX-512 RoPE (rotate-half): 16 pairs (x[i], x[i + d/2]) at a time through
// canonical::RopeRotate<avx512::Arith>, the tail masked. Equals ref::Rope bit for bit.
// Shapes as ref::Rope. Check: ctest -R 'KernelsRope'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table) {
  const int64_t half = head_dim / 2;
  for (int64_t m = 0; m < M; ++m) {
    const float* c = cos_table + static_cast<int64_t>(positions[m]) * half;
    const float* s = sin_table + static_cast<int64_t>(positions[m]) * half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (m * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; i += 16) {
        const __mmask16 mask = FirstLanes(half - i);
        __m512 y1, y2;
        canonical::RopeRotate<Arith>(
            _mm512_maskz_loadu_ps(mask, v + i), _mm512_maskz_loadu_ps(mask, v + i + half),
            _mm512_maskz_loadu_ps(mask, c + i), _mm512_maskz_loadu_ps(mask, s + i), &y1, &y2);
        _mm512_mask_storeu_ps(v + i, mask, y1);
        _mm512_mask_storeu_ps(v + i + half, mask, y2);
      }
    }
  }
}

}  // namespace trace::kernels::avx512
