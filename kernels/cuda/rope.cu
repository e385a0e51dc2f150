// Rope (rotate-half) in place from the host-computed tables, kernels/cpu/ref_rope.cc with
// each product rounded before the add or subtract (no fma).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace trace::kernels::cuda {
namespace {

// One thread per (row, head, i < half).
__global__ void RopeKernel(float* x, int64_t M, int64_t n_heads, int64_t head_dim,
                           const int32_t* positions, const float* cos_table,
                           const float* sin_table) {
  const int64_t half = head_dim / 2;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= M * n_heads * half) return;
  const int64_t i = idx % half;
  const int64_t mh = idx / half;  // m * n_heads + h
  const int64_t m = mh / n_heads;
  const int64_t table = static_cast<int64_t>(positions[m]) * half + i;
  const float c = cos_table[table];
  const float s = sin_table[table];
  float* v = x + mh * head_dim;
  const float x1 = v[i];
  const float x2 = v[i + half];
  v[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
  v[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
}

}  // namespace

void Rope(const CudaContext& ctx, float* x, int64_t M, int64_t n_heads, int64_t head_dim,
          const int32_t* positions, const float* cos_table, const float* sin_table) {
  const int64_t count = M * n_heads * (head_dim / 2);
  if (count <= 0) return;
  RopeKernel<<<detail::CeilDiv(count, 256), 256, 0, ctx.stream>>>(x, M, n_heads, head_dim,
                                                                  positions, cos_table, sin_table);
}

}  // namespace trace::kernels::cuda
