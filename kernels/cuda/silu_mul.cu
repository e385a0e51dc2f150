// SiluMul: out[i] = (g / (1.0f + Exp(-g))) * up[i], g = gate[i] — kernels/cpu/ref_silu_mul.cc
// with each operation rounded explicitly and the engine's own Exp.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/exp.cuh"

namespace trace::kernels::cuda {
namespace {

__global__ void SiluMulKernel(const float* gate, const float* up, int64_t n, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  const float silu = __fdiv_rn(g, __fadd_rn(1.0f, detail::DeviceExp(-g)));
  out[i] = __fmul_rn(silu, up[i]);
}

}  // namespace

void SiluMul(const CudaContext& ctx, const float* gate, const float* up, int64_t n, float* out) {
  if (n <= 0) return;
  SiluMulKernel<<<detail::CeilDiv(n, 256), 256, 0, ctx.stream>>>(gate, up, n, out);
}

}  // namespace trace::kernels::cuda
