// Row moves of the CUDA engine: schedule/elementwise.h ScatterRowsBlock / GatherRowsBlock
// through DeviceBlock (values only; the CPU tests run the same bodies).
#include "engine/cuda/kv_ops.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/elementwise.h"

namespace trace::engine::cuda {
namespace {

namespace sc = kernels::cuda::schedule;
using kernels::cuda::DeviceBlock;

__global__ void __launch_bounds__(sc::kElementwiseThreads)
    ScatterRowsKernel(sc::ScatterRowsArgs args) {
  DeviceBlock block;
  sc::ScatterRowsBlock(block, blockIdx.x, blockIdx.y, gridDim.x, args);
}

__global__ void __launch_bounds__(sc::kElementwiseThreads)
    GatherRowsKernel(sc::GatherRowsArgs args) {
  DeviceBlock block;
  sc::GatherRowsBlock(block, blockIdx.x, blockIdx.y, gridDim.x, args);
}

}  // namespace

void ScatterRows(cudaStream_t stream, const float* src, int64_t rows, int64_t width,
                 float* const* dst_rows, const int32_t* positions) {
  if (rows <= 0 || width <= 0) return;
  const sc::LaunchDims dims = sc::RowMoveLaunch(rows, width);
  ScatterRowsKernel<<<dim3(dims.grid_x, dims.grid_y), dims.block, 0, stream>>>(
      sc::ScatterRowsArgs{src, width, dst_rows, positions});
}

void GatherRows(cudaStream_t stream, const float* src, const int32_t* index, int64_t count,
                int64_t width, float* dst) {
  if (count <= 0 || width <= 0) return;
  const sc::LaunchDims dims = sc::RowMoveLaunch(count, width);
  GatherRowsKernel<<<dim3(dims.grid_x, dims.grid_y), dims.block, 0, stream>>>(
      sc::GatherRowsArgs{src, index, width, dst});
}

}  // namespace trace::engine::cuda
