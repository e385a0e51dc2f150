// MatMul on the device. Canonical: every output element y[m, n] is the canonical dot of
// docs/numerics.md — lane l (0..31) owns the 32-element blocks l, l+32, l+64, ... of K,
// fma-accumulates them from +0.0f in increasing k, and the 32 lane values are combined
// as the left fold ((l0 + l1) + l2) + ... + l31, then the bias is added. Two kernels
// implement that one order: a warp-per-row GEMV for decode (M <= 8, weights read once
// per 8 rows) and a tiled GEMM for prefill that walks the K blocks lane slice by lane
// slice (blocks l, l+32, ... for l = 0..31), folding each finished slice into the total.
// Neither splits K by M, so the bits do not depend on the batch.
// Fast: cuBLAS GemmEx with bf16 (or f16) inputs, f32 accumulation, default heuristics.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace trace::kernels::cuda {
namespace {

using detail::kBlockLen;
using detail::kLanes;
using detail::LoadWeight;
using detail::WarpLeftFold;

// ---- decode GEMV: one warp per output row n, MT activation rows at a time -----------

// Loads the 32 weights of a full block starting at element `k0` of row `row` with 16-byte
// loads (`row` and k0 16-byte aligned by the caller's check).
template <DType D>
__device__ __forceinline__ void LoadFullBlock(const void* row, int64_t k0, float (&wv)[32]) {
  if constexpr (D == DType::kF32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(row) + k0);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 v = __ldg(p + i);
      wv[4 * i] = v.x;
      wv[4 * i + 1] = v.y;
      wv[4 * i + 2] = v.z;
      wv[4 * i + 3] = v.w;
    }
  } else {
    const uint4* p = reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(row) + k0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 v = __ldg(p + i);
      const unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // Little endian: element 2j is the low half of the word.
        const unsigned short lo = static_cast<unsigned short>(words[j] & 0xffffu);
        const unsigned short hi = static_cast<unsigned short>(words[j] >> 16);
        if constexpr (D == DType::kBF16) {
          wv[8 * i + 2 * j] = __uint_as_float(static_cast<unsigned int>(lo) << 16);
          wv[8 * i + 2 * j + 1] = __uint_as_float(static_cast<unsigned int>(hi) << 16);
        } else {
          wv[8 * i + 2 * j] = __half2float(__ushort_as_half(lo));
          wv[8 * i + 2 * j + 1] = __half2float(__ushort_as_half(hi));
        }
      }
    }
  }
}

template <DType D, int MT>
__global__ void GemvKernel(const float* __restrict__ x, int64_t M, const void* __restrict__ w,
                           int64_t N, int64_t K, const float* __restrict__ bias,
                           float* __restrict__ y, bool vector_ok) {
  const int64_t n = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kLanes;
  const int lane = threadIdx.x % kLanes;
  if (n >= N) return;  // the whole warp leaves together (n is uniform per warp)
  const size_t elem = D == DType::kF32 ? 4 : 2;
  const void* row = static_cast<const char*>(w) + static_cast<size_t>(n) * K * elem;
  const int64_t nblocks = (K + kBlockLen - 1) / kBlockLen;
  const float bias_n = bias != nullptr ? bias[n] : 0.0f;

  for (int64_t m0 = 0; m0 < M; m0 += MT) {
    const int mcount = static_cast<int>(M - m0 < MT ? M - m0 : MT);
    float acc[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[m] = 0.0f;

    for (int64_t b = lane; b < nblocks; b += kLanes) {
      const int64_t k0 = b * kBlockLen;
      const int count = static_cast<int>(K - k0 < kBlockLen ? K - k0 : kBlockLen);
      if (vector_ok && count == kBlockLen) {
        float wv[32];
        LoadFullBlock<D>(row, k0, wv);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          if (m < mcount) {
            const float4* xp = reinterpret_cast<const float4*>(x + (m0 + m) * K + k0);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              const float4 xv = __ldg(xp + i);
              acc[m] = __fmaf_rn(xv.x, wv[4 * i], acc[m]);
              acc[m] = __fmaf_rn(xv.y, wv[4 * i + 1], acc[m]);
              acc[m] = __fmaf_rn(xv.z, wv[4 * i + 2], acc[m]);
              acc[m] = __fmaf_rn(xv.w, wv[4 * i + 3], acc[m]);
            }
          }
        }
      } else {
        for (int kk = 0; kk < count; ++kk) {
          const float wk = LoadWeight<D>(row, k0 + kk);
#pragma unroll
          for (int m = 0; m < MT; ++m) {
            if (m < mcount) acc[m] = __fmaf_rn(__ldg(x + (m0 + m) * K + k0 + kk), wk, acc[m]);
          }
        }
      }
    }
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      float sum = WarpLeftFold(acc[m]);  // all lanes take part in the shuffles
      if (bias != nullptr) sum = __fadd_rn(sum, bias_n);
      if (lane == 0 && m < mcount) y[(m0 + m) * N + n] = sum;
    }
  }
}

// ---- prefill GEMM: BM x BN tile per block, TM x TN outputs per thread -----------------

template <DType D, int BM, int BN, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    GemmKernel(const float* __restrict__ x, int64_t M, const void* __restrict__ w, int64_t N,
               int64_t K, const float* __restrict__ bias, float* __restrict__ y) {
  constexpr int kThreads = (BM / TM) * (BN / TN);
  constexpr int kPad = 4;  // keeps rows 16-byte aligned for float4 reads
  __shared__ __align__(16) float xs[kBlockLen][BM + kPad];  // [k][m]
  __shared__ __align__(16) float ws[kBlockLen][BN + kPad];  // [k][n]

  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN);
  const int ty = tid / (BN / TN);
  const int64_t m_base = static_cast<int64_t>(blockIdx.y) * BM;
  const int64_t n_base = static_cast<int64_t>(blockIdx.x) * BN;
  const int64_t nblocks = (K + kBlockLen - 1) / kBlockLen;

  float total[TM][TN];
  float part[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) total[i][j] = 0.0f;

  for (int lane = 0; lane < kLanes; ++lane) {
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) part[i][j] = 0.0f;

    for (int64_t b = lane; b < nblocks; b += kLanes) {
      const int64_t k0 = b * kBlockLen;
      const int count = static_cast<int>(K - k0 < kBlockLen ? K - k0 : kBlockLen);
      for (int e = tid; e < BM * kBlockLen; e += kThreads) {
        const int r = e / kBlockLen;
        const int kk = e % kBlockLen;
        const int64_t m = m_base + r;
        xs[kk][r] = (m < M && kk < count) ? __ldg(x + m * K + k0 + kk) : 0.0f;
      }
      for (int e = tid; e < BN * kBlockLen; e += kThreads) {
        const int r = e / kBlockLen;
        const int kk = e % kBlockLen;
        const int64_t n = n_base + r;
        ws[kk][r] = (n < N && kk < count) ? LoadWeight<D>(w, n * K + k0 + kk) : 0.0f;
      }
      __syncthreads();
      // Only the `count` elements that exist are visited (no zero padding in the sum).
      for (int kk = 0; kk < count; ++kk) {
        float a[TM];
        float bw[TN];
#pragma unroll
        for (int i = 0; i < TM; i += 4) {
          const float4 v = *reinterpret_cast<const float4*>(&xs[kk][ty * TM + i]);
          a[i] = v.x;
          a[i + 1] = v.y;
          a[i + 2] = v.z;
          a[i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
          const float4 v = *reinterpret_cast<const float4*>(&ws[kk][tx * TN + j]);
          bw[j] = v.x;
          bw[j + 1] = v.y;
          bw[j + 2] = v.z;
          bw[j + 3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) part[i][j] = __fmaf_rn(a[i], bw[j], part[i][j]);
      }
      __syncthreads();
    }
    // Lane slice `lane` is complete: the left fold's next step.
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        total[i][j] = lane == 0 ? part[i][j] : __fadd_rn(total[i][j], part[i][j]);
      }
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t m = m_base + ty * TM + i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t n = n_base + tx * TN + j;
      if (n >= N) continue;
      float v = total[i][j];
      if (bias != nullptr) v = __fadd_rn(v, bias[n]);
      y[m * N + n] = v;
    }
  }
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
  const int64_t N = w.rows;
  const int64_t K = w.cols;
  const size_t elem = D == DType::kF32 ? 4 : 2;
  // 16-byte loads need every row start 16-byte aligned, weights and activations alike.
  const bool vector_ok = reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
                         (K * static_cast<int64_t>(elem)) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(x) % 16 == 0 && K % 4 == 0;
  constexpr int kWarpsPerBlock = 4;
  const dim3 block(kWarpsPerBlock * kLanes);
  const dim3 grid(detail::CeilDiv(N, kWarpsPerBlock));
  switch (M < 8 ? M : 8) {
#define TRACE_GEMV_CASE(mt)                                                                \
  case mt:                                                                                 \
    GemvKernel<D, mt><<<grid, block, 0, stream>>>(x, M, w.data, N, K, bias, y, vector_ok); \
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

template <DType D>
void LaunchGemm(cudaStream_t stream, const float* x, int64_t M, const WeightView& w,
                const float* bias, float* y) {
  const int64_t N = w.rows;
  const int64_t K = w.cols;
  // The largest tile that still gives every SM a block (else the smallest). The tile only
  // changes which thread computes an element, never the element's order.
  auto tiles = [&](int64_t bm, int64_t bn) {
    return static_cast<int64_t>(detail::CeilDiv(M, bm)) * detail::CeilDiv(N, bn);
  };
  if (tiles(128, 128) >= SmCount()) {
    const dim3 grid(detail::CeilDiv(N, 128), detail::CeilDiv(M, 128));
    GemmKernel<D, 128, 128, 8, 8><<<grid, 256, 0, stream>>>(x, M, w.data, N, K, bias, y);
  } else if (tiles(64, 64) >= SmCount()) {
    const dim3 grid(detail::CeilDiv(N, 64), detail::CeilDiv(M, 64));
    GemmKernel<D, 64, 64, 4, 4><<<grid, 256, 0, stream>>>(x, M, w.data, N, K, bias, y);
  } else {
    const dim3 grid(detail::CeilDiv(N, 32), detail::CeilDiv(M, 64));
    GemmKernel<D, 64, 32, 4, 4><<<grid, 128, 0, stream>>>(x, M, w.data, N, K, bias, y);
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
  cublasStatus_t st;
  if (w.dtype == DType::kF32) {
    // Row-major y[M,N] = x[M,K] W[N,K]^T is column-major y^T = W^T(op T) x^T.
    st = cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                      static_cast<int>(M), static_cast<int>(K), &alpha, w.data, CUDA_R_32F,
                      static_cast<int>(K), x, CUDA_R_32F, static_cast<int>(K), &beta, y, CUDA_R_32F,
                      static_cast<int>(N), CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  } else {
    const bool bf16 = w.dtype == DType::kBF16;
    const int64_t count = M * K;
    if (ctx.workspace == nullptr || ctx.workspace_bytes < static_cast<size_t>(count) * 2) {
      std::fprintf(stderr, "trace: fast MatMul needs a %lld-byte workspace (have %zu)\n",
                   static_cast<long long>(count * 2), ctx.workspace_bytes);
      std::abort();  // the engine sizes the workspace; reaching here is a bug in trace
    }
    const unsigned int grid = detail::CeilDiv(count, 256);
    if (bf16) {
      ConvertKernel<__nv_bfloat16>
          <<<grid, 256, 0, ctx.stream>>>(x, count, static_cast<__nv_bfloat16*>(ctx.workspace));
    } else {
      ConvertKernel<__half>
          <<<grid, 256, 0, ctx.stream>>>(x, count, static_cast<__half*>(ctx.workspace));
    }
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
    st = cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N),
                      static_cast<int>(M), static_cast<int>(K), &alpha, w.data, type,
                      static_cast<int>(K), ctx.workspace, type, static_cast<int>(K), &beta, y,
                      CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  if (st != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "trace: cublasGemmEx(M=%lld, N=%lld, K=%lld) failed: %s\n",
                 static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
                 cublasGetStatusString(st));
    std::abort();  // shapes were validated at load; a failure here is a bug in trace
  }
  if (bias != nullptr) {
    AddBiasKernel<<<detail::CeilDiv(M * N, 256), 256, 0, ctx.stream>>>(y, M, N, bias);
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
