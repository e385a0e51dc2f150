// Add: y[i] = a[i] + b[i], one rounding per element (schedule/elementwise.h AddBlock).
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/elementwise.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

__global__ void __launch_bounds__(sc::kElementwiseThreads) AddKernel(sc::BinaryArgs args) {
  DeviceBlock block;
  sc::AddBlock(block, blockIdx.x, args);
}

}  // namespace

void Add(const CudaContext& ctx, const float* a, const float* b, int64_t n, float* y) {
  if (n <= 0) return;
  const sc::LaunchDims dims = sc::ElementwiseLaunch(n);
  AddKernel<<<dims.grid_x, dims.block, 0, ctx.stream>>>(sc::BinaryArgs{a, b, n, y});
}

}  // namespace trace::kernels::cuda
