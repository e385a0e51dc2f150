// ExpElementwise: out[i] = Exp(x[i]) with the device transcription of the engine's exp,
// so tests can compare it with the CPU definition over many floats.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/exp.cuh"

namespace trace::kernels::cuda {
namespace {

__global__ void ExpKernel(const float* __restrict__ x, int64_t n, float* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = detail::DeviceExp(x[i]);
}

}  // namespace

void ExpElementwise(cudaStream_t stream, const float* x, int64_t n, float* out) {
  if (n <= 0) return;
  ExpKernel<<<detail::CeilDiv(n, 256), 256, 0, stream>>>(x, n, out);
}

}  // namespace trace::kernels::cuda
