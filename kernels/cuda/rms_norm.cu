// RmsNorm: one warp per row. sum_sq is the canonical dot of the row with itself (lane l
// owns blocks l, l+32, ...; fma from +0.0f in increasing i; left fold), then
// inv = 1 / sqrt(sum_sq / n + eps) and out = (x * inv) * w, each step rounded as in
// kernels/cpu/ref_rmsnorm.cc. out may alias x: each lane reads its elements before the
// fold and writes only after it.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace trace::kernels::cuda {
namespace {

template <DType D>
__global__ void RmsNormKernel(const float* x, int64_t M, int64_t n, const void* weight, float eps,
                              float* out) {
  const int64_t m = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / detail::kLanes;
  const int lane = threadIdx.x % detail::kLanes;
  if (m >= M) return;
  const float* xr = x + m * n;
  float acc = 0.0f;
  const int64_t nblocks = (n + detail::kBlockLen - 1) / detail::kBlockLen;
  for (int64_t b = lane; b < nblocks; b += detail::kLanes) {
    const int64_t end = (b + 1) * detail::kBlockLen < n ? (b + 1) * detail::kBlockLen : n;
    for (int64_t i = b * detail::kBlockLen; i < end; ++i) acc = __fmaf_rn(xr[i], xr[i], acc);
  }
  const float sum_sq = detail::WarpLeftFold(acc);
  const float inv =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sum_sq, static_cast<float>(n)), eps)));
  float* orow = out + m * n;
  for (int64_t i = lane; i < n; i += detail::kLanes) {
    orow[i] = __fmul_rn(__fmul_rn(xr[i], inv), detail::LoadWeight<D>(weight, i));
  }
}

}  // namespace

void RmsNorm(const CudaContext& ctx, const float* x, int64_t M, int64_t n, const WeightView& weight,
             float eps, float* out) {
  if (M <= 0 || n <= 0) return;
  constexpr int kWarps = 4;
  const unsigned int grid = detail::CeilDiv(M, kWarps);
  switch (weight.dtype) {
    case DType::kF32:
      RmsNormKernel<DType::kF32>
          <<<grid, kWarps * 32, 0, ctx.stream>>>(x, M, n, weight.data, eps, out);
      break;
    case DType::kBF16:
      RmsNormKernel<DType::kBF16>
          <<<grid, kWarps * 32, 0, ctx.stream>>>(x, M, n, weight.data, eps, out);
      break;
    case DType::kF16:
      RmsNormKernel<DType::kF16>
          <<<grid, kWarps * 32, 0, ctx.stream>>>(x, M, n, weight.data, eps, out);
      break;
  }
}

}  // namespace trace::kernels::cuda
