// Add: y[i] = a[i] + b[i], one rounding per element (the same on every backend).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace trace::kernels::cuda {
namespace {

__global__ void AddKernel(const float* a, const float* b, int64_t n, float* y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(a[i], b[i]);
}

}  // namespace

void Add(const CudaContext& ctx, const float* a, const float* b, int64_t n, float* y) {
  if (n <= 0) return;
  AddKernel<<<detail::CeilDiv(n, 256), 256, 0, ctx.stream>>>(a, b, n, y);
}

}  // namespace trace::kernels::cuda
