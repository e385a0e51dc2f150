// Reference: Embedding, out[m, :] = f32(table[ids[m], :]) (exact conversion).
// Shapes: table [V, D] bf16|f16|f32, ids [M], out [M, D]. Ids are the caller's contract
// (the engine checks them against the vocabulary). Check: ctest -R 'KernelsEmbedding'.
#include "kernels/cpu/cpu_kernels.h"

namespace trace::kernels::ref {

void Embedding(const WeightView& table, const int32_t* ids, int64_t M, float* out) {
  for (int64_t m = 0; m < M; ++m) WeightRowToF32(table, ids[m], table.cols, out + m * table.cols);
}

}  // namespace trace::kernels::ref
