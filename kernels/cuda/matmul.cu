// MatMul on the device. Canonical: every output element y[m, n] is the canonical dot of
// docs/numerics.md. Two kernels implement that one order, each a thin wrapper around its
// host-callable body in kernels/cuda/schedule/ (where the work decomposition and every
// arithmetic step are written, and where the CPU tests run them): GemvKernel
// (schedule/gemv.h, M <= 8: a warp per output row, weights read once per 8 rows) and
// GemmKernel (schedule/gemm.h, M > 8: tiles walking K lane slice by lane slice). Neither
// splits K by M, so the bits do not depend on the batch.
// Fast: cuBLAS GemmEx with bf16 (or f16) inputs, f32 accumulation, default heuristics, called
// through the run-time loaded table (cublas_loader.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "kernels/cuda/cublas_loader.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/gemm.h"
#include "kernels/cuda/schedule/gemv.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

template <DType D, int MT>
__global__ void __launch_bounds__(sc::kGemvThreads) GemvKernel(sc::GemvArgs args) {
  DeviceBlock block;
  sc::GemvBlock<D, MT>(block, blockIdx.x, args);
}

template <class Tile, DType D>
__global__ void __launch_bounds__(Tile::kThreads) GemmKernel(sc::GemmArgs args) {
  __shared__ __align__(16) float xs[Tile::kXsFloats];  // [k][m]
  __shared__ __align__(16) float ws[Tile::kWsFloats];  // [k][n]
  DeviceBlock block;
  sc::GemmBlock<Tile, D>(block, blockIdx.x, blockIdx.y, args, xs, ws);
}

int SmCount() {
  static const int count = [] {
    int device = 0;
    int sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      return 132;
    }
    return sms;
  }();
  return count;
}

template <DType D>
void LaunchGemv(cudaStream_t stream, const float* x, int64_t M, const WeightView& w,
                const float* bias, float* y) {
  sc::GemvArgs args{x,      M,    w.data, w.rows,
                    w.cols, bias, y,      sc::GemvVectorOk(x, w.data, w.cols, w.dtype)};
  const sc::LaunchDims dims = sc::GemvLaunch(w.rows);
  const dim3 grid(dims.grid_x, dims.grid_y);
  switch (sc::GemvRowsPerPass(M)) {
#define TRACE_GEMV_CASE(mt)                                   \
  case mt:                                                    \
    GemvKernel<D, mt><<<grid, dims.block, 0, stream>>>(args); \
    break;
    TRACE_GEMV_CASE(1)
    TRACE_GEMV_CASE(2)
    TRACE_GEMV_CASE(3)
    TRACE_GEMV_CASE(4)
    TRACE_GEMV_CASE(5)
    TRACE_GEMV_CASE(6)
    TRACE_GEMV_CASE(7)
    TRACE_GEMV_CASE(8)
#undef TRACE_GEMV_CASE
    default:
      break;
  }
}

template <class Tile, DType D>
void LaunchGemmTile(cudaStream_t stream, const sc::GemmArgs& args) {
  const sc::LaunchDims dims = sc::GemmLaunch<Tile>(args.M, args.N);
  GemmKernel<Tile, D><<<dim3(dims.grid_x, dims.grid_y), dims.block, 0, stream>>>(args);
}

template <DType D>
void LaunchGemm(cudaStream_t stream, const float* x, int64_t M, const WeightView& w,
                const float* bias, float* y) {
  const sc::GemmArgs args{x, M, w.data, w.rows, w.cols, bias, y};
  switch (sc::ChooseGemmTile(M, w.rows, SmCount())) {
    case sc::GemmTileKind::k128x128:
      return LaunchGemmTile<sc::GemmTile128x128, D>(stream, args);
    case sc::GemmTileKind::k64x64:
      return LaunchGemmTile<sc::GemmTile64x64, D>(stream, args);
    case sc::GemmTileKind::k64x32:
      return LaunchGemmTile<sc::GemmTile64x32, D>(stream, args);
  }
}

// ---- fast mode -------------------------------------------------------------------------

template <typename T>
__global__ void ConvertKernel(const float* __restrict__ x, int64_t n, T* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    out[i] = __float2bfloat16_rn(x[i]);
  } else {
    out[i] = __float2half_rn(x[i]);
  }
}

__global__ void AddBiasKernel(float* __restrict__ y, int64_t M, int64_t N,
                              const float* __restrict__ bias) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= M * N) return;
  y[i] = y[i] + bias[i % N];
}

void FastMatMul(const CudaContext& ctx, const float* x, int64_t M, const WeightView& w,
                const float* bias, float* y) {
  const int64_t N = w.rows;
  const int64_t K = w.cols;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  // The engine made ctx.cublas through the loader, so cuBLAS is loaded.
  const CublasApi& blas = LoadedCublas();
  cublasStatus_t st;
  if (w.dtype == DType::kF32) {
    // Row-major y[M,N] = x[M,K] W[N,K]^T is column-major y^T = W^T(op T) x^T.
    st = blas.GemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                     static_cast<int>(K), &alpha, w.data, CUDA_R_32F, static_cast<int>(K), x,
                     CUDA_R_32F, static_cast<int>(K), &beta, y, CUDA_R_32F, static_cast<int>(N),
                     CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  } else {
    const bool bf16 = w.dtype == DType::kBF16;
    const int64_t count = M * K;
    if (ctx.workspace == nullptr || ctx.workspace_bytes < static_cast<size_t>(count) * 2) {
      std::fprintf(stderr, "trace: fast MatMul needs a %lld-byte workspace (have %zu)\n",
                   static_cast<long long>(count * 2), ctx.workspace_bytes);
      std::abort();  // the engine sizes the workspace; reaching here is a bug in trace
    }
    const unsigned int grid = sc::CeilDiv(count, 256);
    if (bf16) {
      ConvertKernel<__nv_bfloat16>
          <<<grid, 256, 0, ctx.stream>>>(x, count, static_cast<__nv_bfloat16*>(ctx.workspace));
    } else {
      ConvertKernel<__half>
          <<<grid, 256, 0, ctx.stream>>>(x, count, static_cast<__half*>(ctx.workspace));
    }
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    st = blas.GemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                     static_cast<int>(K), &alpha, w.data, type, static_cast<int>(K), ctx.workspace,
                     type, static_cast<int>(K), &beta, y, CUDA_R_32F, static_cast<int>(N),
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "trace: cublasGemmEx(M=%lld, N=%lld, K=%lld) failed: %s\n",
                 static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                 blas.GetStatusString(st));
    std::abort();  // shapes were validated at load; a failure here is a bug in trace
  }
  if (bias != nullptr) {
    AddBiasKernel<<<sc::CeilDiv(M * N, 256), 256, 0, ctx.stream>>>(y, M, N, bias);
  }
}

}  // namespace

void CanonicalGemv(cudaStream_t stream, const float* x, int64_t M, const WeightView& w,
                   const float* bias, float* y) {
  if (M <= 0 || w.rows <= 0) return;
  switch (w.dtype) {
    case DType::kF32:
      LaunchGemv<DType::kF32>(stream, x, M, w, bias, y);
      break;
    case DType::kBF16:
      LaunchGemv<DType::kBF16>(stream, x, M, w, bias, y);
      break;
    case DType::kF16:
      LaunchGemv<DType::kF16>(stream, x, M, w, bias, y);
      break;
  }
}

void CanonicalGemm(cudaStream_t stream, const float* x, int64_t M, const WeightView& w,
                   const float* bias, float* y) {
  if (M <= 0 || w.rows <= 0) return;
  switch (w.dtype) {
    case DType::kF32:
      LaunchGemm<DType::kF32>(stream, x, M, w, bias, y);
      break;
    case DType::kBF16:
      LaunchGemm<DType::kBF16>(stream, x, M, w, bias, y);
      break;
    case DType::kF16:
      LaunchGemm<DType::kF16>(stream, x, M, w, bias, y);
      break;
  }
}

void MatMul(const CudaContext& ctx, const float* x, int64_t M, const WeightView& w,
            const float* bias, float* y) {
  if (M <= 0 || w.rows <= 0) return;
  if (ctx.numerics == Numerics::kFast) {
    FastMatMul(ctx, x, M, w, bias, y);
  } else if (M <= 8) {
    CanonicalGemv(ctx.stream, x, M, w, bias, y);
  } else {
    CanonicalGemm(ctx.stream, x, M, w, bias, y);
  }
}

}  // namespace trace::kernels::cuda
