// AVX-512 Embedding: out[m, :] = f32(table[ids[m], :]), 16 weights at a time with the exact
// conversions of avx512_common.h (bf16 shift, vcvtph2ps), the tail masked. Row-major tables
// only; kInterleaved32 runs the reference. Equals ref::Embedding bit for bit.
// Check: ctest -R 'KernelsEmbedding'.
#include "kernels/cpu/avx512_common.h"
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::avx512 {
namespace {

template <DType D>
void EmbeddingRows(const WeightView& table, const int32_t* ids, int64_t M, float* out) {
  const int64_t dim = table.cols;
  for (int64_t m = 0; m < M; ++m) {
    const int64_t base = static_cast<int64_t>(ids[m]) * dim;
    float* o = out + m * dim;
    for (int64_t i = 0; i < dim; i += 16) {
      const __mmask16 mask = FirstLanes(dim - i);
      _mm512_mask_storeu_ps(o + i, mask, MaskLoadWeights16<D>(table.data, base + i, mask));
    }
  }
}

}  // namespace

void Embedding(const WeightView& table, const int32_t* ids, int64_t M, float* out) {
  if (table.layout != WeightLayout::kRowMajor || IsQuantized(table.dtype)) {
    return ref::Embedding(table, ids, M, out);
  }
  WithDType(table.dtype, [&](auto d) { EmbeddingRows<decltype(d)::value>(table, ids, M, out); });
}

}  // namespace trace::kernels::avx512
