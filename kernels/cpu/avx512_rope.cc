// AVX-512 RoPE (rotate-half): 16 pairs (x[i], x[i + d/2]) at a time through
// canonical::RopeRotate<avx512::Arith>, the tail masked. Equals ref::Rope bit for bit.
// Shapes as ref::Rope. Check: ctest -R 'KernelsRope'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {

void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table) {
  RopeHeads(x, M, n_heads, head_dim, positions, cos_table, sin_table,
            [](float* v, const float* c, const float* s, int64_t half) {
              for (int64_t i = 0; i < half; i += 16) {
                const __mmask16 mask = FirstLanes(half - i);
                __m512 y1, y2;
                canonical::RopeRotate<Arith>(_mm512_maskz_loadu_ps(mask, v + i),
                                             _mm512_maskz_loadu_ps(mask, v + i + half),
                                             _mm512_maskz_loadu_ps(mask, c + i),
                                             _mm512_maskz_loadu_ps(mask, s + i), &y1, &y2);
                _mm512_mask_storeu_ps(v + i, mask, y1);
                _mm512_mask_storeu_ps(v + i + half, mask, y2);
              }
            });
}

}  // namespace trace::kernels::avx512
