// Embedding: out[m, :] = f32(table[ids[m], :]), an exact conversion, times `scale` when not 1
// (schedule/elementwise.h EmbeddingBlock).
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/elementwise.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

template <DType D>
__global__ void __launch_bounds__(sc::kElementwiseThreads) EmbeddingKernel(sc::EmbeddingArgs args) {
  DeviceBlock block;
  sc::EmbeddingBlock<D>(block, blockIdx.x, blockIdx.y, args);
}

}  // namespace

void Embedding(const CudaContext& ctx, const WeightView& table, const int32_t* ids, int64_t M,
               float* out, float scale) {
  if (M <= 0 || table.cols <= 0) return;
  const sc::EmbeddingArgs args{table.data, table.cols, ids, M, out, scale};
  const sc::LaunchDims dims = sc::EmbeddingLaunch(M, table.cols);
  const dim3 grid(dims.grid_x, dims.grid_y);
  switch (table.dtype) {
    case DType::kF32:
      EmbeddingKernel<DType::kF32><<<grid, dims.block, 0, ctx.stream>>>(args);
      break;
    case DType::kBF16:
      EmbeddingKernel<DType::kBF16><<<grid, dims.block, 0, ctx.stream>>>(args);
      break;
    case DType::kF16:
      EmbeddingKernel<DType::kF16><<<grid, dims.block, 0, ctx.stream>>>(args);
      break;
  }
}

}  // namespace trace::kernels::cuda
