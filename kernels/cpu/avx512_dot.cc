// AVX-512 CanonicalDot (the sum of squares of RmsNorm): 16 consecutive whole blocks (16
// lanes) at a time, each block's 32 elements transposed 16x16 so that one register holds
// element i of 16 blocks and the 16 lane chains run side by side in increasing k; a last
// group of fewer than 16 whole blocks runs the same code on zero rows and keeps only its
// live lanes; the partial last block and the fold are canonical::DotTail / FoldLanes. Equals
// ref CanonicalDot and avx2::CanonicalDot bit for bit. Check: ctest -R 'KernelsDot'.
#include <algorithm>

#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {
namespace {

// kSquares: b is a (the dot of a with itself), transposed once.
template <bool kSquares>
float Dot(const float* a, const float* b, int64_t n) {
  alignas(64) float lane[canonical::kLanes] = {};
  const int64_t full_blocks = n / canonical::kBlockLen;
  for (int64_t block = 0; block < full_blocks; block += 16) {
    // block is a multiple of 16, so its 16 lanes are 0..15 or 16..31.
    const int64_t live = std::min<int64_t>(16, full_blocks - block);
    float* lanes = lane + canonical::LaneOfBlock(block);
    __m512 acc = _mm512_load_ps(lanes);
    for (int64_t i = 0; i < canonical::kBlockLen; i += 16) {
      __m512 va[16], vb[16];
      for (int q = 0; q < 16; ++q) {
        const int64_t at = (block + q) * canonical::kBlockLen + i;
        va[q] = q < live ? _mm512_loadu_ps(a + at) : _mm512_setzero_ps();
        if constexpr (!kSquares) vb[q] = q < live ? _mm512_loadu_ps(b + at) : _mm512_setzero_ps();
      }
      Transpose16x16(va);
      if constexpr (!kSquares) Transpose16x16(vb);
      for (int t = 0; t < 16; ++t) {
        if constexpr (kSquares) {
          acc = canonical::ChainStep<Arith>(acc, va[t], va[t]);
        } else {
          acc = canonical::ChainStep<Arith>(acc, va[t], vb[t]);
        }
      }
    }
    _mm512_mask_store_ps(lanes, FirstLanes(live), acc);
  }
  // The partial last block comes after every whole block of its lane.
  canonical::DotTail(lane, a, b, full_blocks * canonical::kBlockLen, n);
  return canonical::FoldLanes(lane);
}

}  // namespace

float CanonicalDot(const float* a, const float* b, int64_t n) {
  return a == b ? Dot<true>(a, a, n) : Dot<false>(a, b, n);
}

}  // namespace trace::kernels::avx512
