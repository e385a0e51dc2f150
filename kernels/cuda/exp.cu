// ExpElementwise: out[i] = Exp(x[i]) on the device (schedule/elementwise.h ExpBlock, the
// canonical::Exp of kernels/canonical.h), so tests can compare it with the CPU over many
// floats.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/elementwise.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

__global__ void __launch_bounds__(sc::kElementwiseThreads) ExpKernel(sc::BinaryArgs args) {
  DeviceBlock block;
  sc::ExpBlock(block, blockIdx.x, args);
}

}  // namespace

void ExpElementwise(cudaStream_t stream, const float* x, int64_t n, float* out) {
  if (n <= 0) return;
  const sc::LaunchDims dims = sc::ElementwiseLaunch(n);
  ExpKernel<<<dims.grid_x, dims.block, 0, stream>>>(sc::BinaryArgs{x, nullptr, n, out});
}

}  // namespace trace::kernels::cuda
