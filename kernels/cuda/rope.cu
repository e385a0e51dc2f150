// Rope (rotate-half) in place from the host-computed tables (schedule/elementwise.h
// RopeBlock: canonical::RopeRotate, each product rounded before the add or subtract).
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/elementwise.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

__global__ void __launch_bounds__(sc::kElementwiseThreads) RopeKernel(sc::RopeArgs args) {
  DeviceBlock block;
  sc::RopeBlock(block, blockIdx.x, args);
}

}  // namespace

void Rope(const CudaContext& ctx, float* x, int64_t M, int64_t n_heads, int64_t head_dim,
          const int32_t* positions, const float* cos_table, const float* sin_table) {
  const sc::RopeArgs args{x, M, n_heads, head_dim, positions, cos_table, sin_table};
  const int64_t count = sc::RopePairs(args);
  if (count <= 0) return;
  const sc::LaunchDims dims = sc::ElementwiseLaunch(count);
  RopeKernel<<<dims.grid_x, dims.block, 0, ctx.stream>>>(args);
}

}  // namespace trace::kernels::cuda
