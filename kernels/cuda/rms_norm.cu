// RmsNorm: one warp per row (schedule/rms_norm.h RmsNormBlock: the canonical dot of the row
// with itself, then canonical::RmsInverse and RmsScale). out may alias x.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/rms_norm.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

template <DType D>
__global__ void __launch_bounds__(sc::kRmsNormThreads) RmsNormKernel(sc::RmsNormArgs args) {
  DeviceBlock block;
  sc::RmsNormBlock<D>(block, blockIdx.x, args);
}

}  // namespace

void RmsNorm(const CudaContext& ctx, const float* x, int64_t M, int64_t n, const WeightView& weight,
             float eps, float* out) {
  if (M <= 0 || n <= 0) return;
  const sc::RmsNormArgs args{x, M, n, weight.data, eps, out};
  const sc::LaunchDims dims = sc::RmsNormLaunch(M);
  switch (weight.dtype) {
    case DType::kF32:
      RmsNormKernel<DType::kF32><<<dims.grid_x, dims.block, 0, ctx.stream>>>(args);
      break;
    case DType::kBF16:
      RmsNormKernel<DType::kBF16><<<dims.grid_x, dims.block, 0, ctx.stream>>>(args);
      break;
    case DType::kF16:
      RmsNormKernel<DType::kF16><<<dims.grid_x, dims.block, 0, ctx.stream>>>(args);
      break;
  }
}

}  // namespace trace::kernels::cuda
