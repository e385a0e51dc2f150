// Embedding: out[m, :] = f32(table[ids[m], :]), an exact conversion.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace trace::kernels::cuda {
namespace {

template <DType D>
__global__ void EmbeddingKernel(const void* table, int64_t cols, const int32_t* ids, int64_t M,
                                float* out) {
  const int64_t m = blockIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (m >= M || c >= cols) return;
  out[m * cols + c] = detail::LoadWeight<D>(table, static_cast<int64_t>(ids[m]) * cols + c);
}

}  // namespace

void Embedding(const CudaContext& ctx, const WeightView& table, const int32_t* ids, int64_t M,
               float* out) {
  if (M <= 0 || table.cols <= 0) return;
  const dim3 grid(detail::CeilDiv(table.cols, 256), static_cast<unsigned int>(M));
  switch (table.dtype) {
    case DType::kF32:
      EmbeddingKernel<DType::kF32>
          <<<grid, 256, 0, ctx.stream>>>(table.data, table.cols, ids, M, out);
      break;
    case DType::kBF16:
      EmbeddingKernel<DType::kBF16>
          <<<grid, 256, 0, ctx.stream>>>(table.data, table.cols, ids, M, out);
      break;
    case DType::kF16:
      EmbeddingKernel<DType::kF16>
          <<<grid, 256, 0, ctx.stream>>>(table.data, table.cols, ids, M, out);
      break;
  }
}

}  // namespace trace::kernels::cuda
