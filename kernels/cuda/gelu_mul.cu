// GeluTanhMul: out[i] = gelu_tanh(gate[i]) * up[i] (schedule/elementwise.h GeluTanhMulBlock:
// canonical::GeluTanhMul, each operation rounded as on the CPU).
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/elementwise.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

__global__ void __launch_bounds__(sc::kElementwiseThreads) GeluTanhMulKernel(sc::BinaryArgs args) {
  DeviceBlock block;
  sc::GeluTanhMulBlock(block, blockIdx.x, args);
}

}  // namespace

void GeluTanhMul(const CudaContext& ctx, const float* gate, const float* up, int64_t n,
                 float* out) {
  if (n <= 0) return;
  const sc::LaunchDims dims = sc::ElementwiseLaunch(n);
  GeluTanhMulKernel<<<dims.grid_x, dims.block, 0, ctx.stream>>>(sc::BinaryArgs{gate, up, n, out});
}

}  // namespace trace::kernels::cuda
