// Mixture-of-experts kernels on the device (schedule/moe.h holds the launches and the block
// bodies the CPU tests run): routing, fast numerics' capacity, grouping by expert, the
// experts' matrices by the canonical GEMV body, combine and the shared expert's term. Every
// launch depends only on the pass's row count, so a pass's layers stay one CUDA graph.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/moe.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

__global__ void __launch_bounds__(sc::kElementwiseThreads) MoeRouteKernel(sc::MoeRouteArgs args) {
  DeviceBlock block;
  sc::MoeRouteBlock(block, blockIdx.x, args);
}

__global__ void __launch_bounds__(sc::kElementwiseThreads) MoeRankKernel(sc::MoeCapacityArgs args) {
  DeviceBlock block;
  sc::MoeRankBlock(block, blockIdx.x, args);
}

__global__ void MoeCapacityKernel(sc::MoeCapacityArgs args) {
  DeviceBlock block;
  sc::MoeCapacityBlock(block, args);
}

__global__ void __launch_bounds__(sc::kMoeGroupThreads) MoeGroupKernel(sc::MoeGroupArgs args) {
  DeviceBlock block;
  sc::MoeGroupBlock(block, args);
}

template <DType D>
__global__ void __launch_bounds__(sc::kGemvThreads)
    MoeExpertGemvKernel(sc::MoeExpertGemvArgs args) {
  DeviceBlock block;
  sc::MoeExpertGemvBlock<D>(block, blockIdx.x, blockIdx.y, args);
}

__global__ void __launch_bounds__(sc::kElementwiseThreads)
    MoeCombineKernel(sc::MoeCombineArgs args) {
  DeviceBlock block;
  sc::MoeCombineBlock(block, blockIdx.x, args);
}

__global__ void __launch_bounds__(sc::kElementwiseThreads)
    MoeAddSharedKernel(sc::MoeAddSharedArgs args) {
  DeviceBlock block;
  sc::MoeAddSharedBlock(block, blockIdx.x, args);
}

}  // namespace

void MoeRoute(const CudaContext& ctx, const float* logits, int64_t M, int64_t E, int64_t k,
              bool normalize, const MoeRouteScratch& scratch, int32_t* ids, float* weights) {
  if (M <= 0) return;
  const sc::LaunchDims dims = sc::ElementwiseLaunch(M);
  MoeRouteKernel<<<dims.grid_x, dims.block, 0, ctx.stream>>>(
      sc::MoeRouteArgs{logits, M, E, k, normalize, scratch.probs, ids, weights});
  if (ctx.numerics == Numerics::kCanonical) return;
  const sc::MoeCapacityArgs cap{ids, weights, M, E, k, scratch.rank, scratch.load};
  const sc::LaunchDims slots = sc::ElementwiseLaunch(M * k);
  MoeRankKernel<<<slots.grid_x, slots.block, 0, ctx.stream>>>(cap);
  MoeCapacityKernel<<<1, 1, 0, ctx.stream>>>(cap);
}

void MoeGroup(const CudaContext& ctx, const int32_t* ids, int64_t slots, int64_t E,
              int32_t* offsets, int32_t* order) {
  if (slots <= 0) return;
  const sc::LaunchDims dims = sc::MoeGroupLaunch();
  MoeGroupKernel<<<1, dims.block, 0, ctx.stream>>>(sc::MoeGroupArgs{ids, slots, E, offsets, order});
}

void MoeExpertMatMul(const CudaContext& ctx, const float* x, int64_t x_per_row,
                     const int32_t* order, const int32_t* ids, int64_t slots,
                     const void* const* weights, DType dtype, int64_t N, int64_t K, bool vector_ok,
                     float* y) {
  if (slots <= 0) return;
  const sc::MoeExpertGemvArgs args{x, x_per_row, order, ids, weights, N, K, y, vector_ok};
  const sc::LaunchDims dims = sc::MoeExpertGemvLaunch(slots, N);
  const dim3 grid(dims.grid_x, dims.grid_y);
  switch (dtype) {
    case DType::kBF16:
      MoeExpertGemvKernel<DType::kBF16><<<grid, dims.block, 0, ctx.stream>>>(args);
      break;
    case DType::kF16:
      MoeExpertGemvKernel<DType::kF16><<<grid, dims.block, 0, ctx.stream>>>(args);
      break;
    case DType::kF32:
      MoeExpertGemvKernel<DType::kF32><<<grid, dims.block, 0, ctx.stream>>>(args);
      break;
  }
}

void MoeCombine(const CudaContext& ctx, const float* expert_out, const int32_t* ids,
                const float* weights, int64_t M, int64_t k, int64_t n, float* out) {
  if (M * n <= 0) return;
  const sc::LaunchDims dims = sc::ElementwiseLaunch(M * n);
  MoeCombineKernel<<<dims.grid_x, dims.block, 0, ctx.stream>>>(
      sc::MoeCombineArgs{expert_out, ids, weights, M, k, n, out});
}

void MoeAddShared(const CudaContext& ctx, const float* shared_out, const float* gate_logits,
                  int64_t M, int64_t n, float* out) {
  if (M * n <= 0) return;
  const sc::LaunchDims dims = sc::ElementwiseLaunch(M * n);
  MoeAddSharedKernel<<<dims.grid_x, dims.block, 0, ctx.stream>>>(
      sc::MoeAddSharedArgs{shared_out, gate_logits, M, n, out});
}

}  // namespace trace::kernels::cuda
