// Attention over a sequence's KV cache, one block per (query row, head).
// Canonical (kernels/cpu/ref_attention.cc, docs/numerics.md "Attention"): two passes —
// s_j = CanonicalDot(q, k_j) * scale for every visible j (one thread per position, the
// dot in the contract's lane order), the exact max, p_j = Exp(s_j - max), the canonical
// sum over positions (lane l owns position blocks l, l+32, ...), and for every d the
// canonical dot over positions of (p_j, v_j[d]) divided by the sum. The 32 x head_dim
// lane partials of that last dot are computed in parallel and folded in lane order.
// No online rescaling, so a position gets the same bits in prefill and decode.
// Fast: a conventional online-softmax kernel (warps split the positions, butterfly
// reductions, __expf), free to reorder sums.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/exp.cuh"

namespace trace::kernels::cuda {
namespace {

using detail::kBlockLen;
using detail::kLanes;

constexpr int kAttnThreads = 256;

// Where row r's cache and position come from: device arrays (batched) or one sequence.
struct RowSource {
  const float* const* k_caches = nullptr;  // null: use k0/v0/pos0 for every row
  const float* const* v_caches = nullptr;
  const int32_t* positions = nullptr;
  const float* k0 = nullptr;
  const float* v0 = nullptr;
  int64_t pos0 = 0;

  __device__ void Get(int64_t r, const float** k, const float** v, int64_t* pos) const {
    if (k_caches != nullptr) {
      *k = k_caches[r];
      *v = v_caches[r];
      *pos = positions[r];
    } else {
      *k = k0;
      *v = v0;
      *pos = pos0;
    }
  }
};

// CanonicalDot(a, b, n) by one thread, lane slice by lane slice (the reference's order).
__device__ float SerialCanonicalDot(const float* a, const float* b, int64_t n) {
  const int64_t nblocks = (n + kBlockLen - 1) / kBlockLen;
  float result = 0.0f;
  for (int lane = 0; lane < kLanes; ++lane) {
    float acc = 0.0f;
    for (int64_t blk = lane; blk < nblocks; blk += kLanes) {
      const int64_t end = (blk + 1) * kBlockLen < n ? (blk + 1) * kBlockLen : n;
      for (int64_t k = blk * kBlockLen; k < end; ++k) acc = __fmaf_rn(a[k], b[k], acc);
    }
    result = lane == 0 ? acc : __fadd_rn(result, acc);
  }
  return result;
}

__global__ void __launch_bounds__(kAttnThreads)
    CanonicalAttentionKernel(const float* __restrict__ q, RowSource src, int64_t n_heads,
                             int64_t n_kv_heads, int64_t head_dim, float scale,
                             float* __restrict__ scratch, int64_t scratch_stride,
                             float* __restrict__ out) {
  extern __shared__ float partials[];  // [kLanes][head_dim]
  __shared__ float warp_max[kAttnThreads / kLanes];
  __shared__ float total_sum;
  const int64_t h = blockIdx.x;
  const int64_t r = blockIdx.y;
  const int tid = threadIdx.x;
  const float* k_cache;
  const float* v_cache;
  int64_t pos;
  src.Get(r, &k_cache, &v_cache, &pos);
  const int64_t n_pos = pos + 1;
  const int64_t kvh = h / (n_heads / n_kv_heads);
  const int64_t kv_stride = n_kv_heads * head_dim;
  const float* qh = q + (r * n_heads + h) * head_dim;
  const float* kh = k_cache + kvh * head_dim;
  const float* vh = v_cache + kvh * head_dim;
  float* p = scratch + (r * n_heads + h) * scratch_stride;

  // Pass 1: scores and their maximum.
  float local_max = -INFINITY;
  for (int64_t j = tid; j < n_pos; j += kAttnThreads) {
    const float s = __fmul_rn(SerialCanonicalDot(qh, kh + j * kv_stride, head_dim), scale);
    p[j] = s;
    local_max = fmaxf(local_max, s);
  }
  for (int off = kLanes / 2; off > 0; off /= 2) {
    local_max = fmaxf(local_max, __shfl_xor_sync(0xffffffffu, local_max, off));
  }
  if (tid % kLanes == 0) warp_max[tid / kLanes] = local_max;
  __syncthreads();  // also publishes p[] to the whole block
  float mx = warp_max[0];
  for (int w = 1; w < kAttnThreads / kLanes; ++w) mx = fmaxf(mx, warp_max[w]);
  // The reference keeps a NaN first score (`if (p[j] > mx)` never replaces it); fmaxf
  // skips NaNs, so restore that one case. Max is otherwise order-free: the only tie it
  // could break differently is +0 vs -0, and Exp(+0) == Exp(-0) == 1.
  if (isnan(p[0])) mx = p[0];

  // Pass 2: probabilities.
  for (int64_t j = tid; j < n_pos; j += kAttnThreads) p[j] = detail::DeviceExp(__fsub_rn(p[j], mx));
  __syncthreads();

  // Canonical sum over positions: warp 0, lane l owns position blocks l, l+32, ...
  const int64_t nblocks = (n_pos + kBlockLen - 1) / kBlockLen;
  if (tid < kLanes) {
    float acc = 0.0f;
    for (int64_t blk = tid; blk < nblocks; blk += kLanes) {
      const int64_t end = (blk + 1) * kBlockLen < n_pos ? (blk + 1) * kBlockLen : n_pos;
      for (int64_t j = blk * kBlockLen; j < end; ++j) acc = __fadd_rn(acc, p[j]);
    }
    const float sum = detail::WarpLeftFold(acc);
    if (tid == 0) total_sum = sum;
  }

  // Weighted sum of V: lane partial (l, d) for every l < 32 and d < head_dim.
  for (int64_t idx = tid; idx < kLanes * head_dim; idx += kAttnThreads) {
    const int64_t lane = idx / head_dim;
    const int64_t d = idx % head_dim;
    float acc = 0.0f;
    for (int64_t blk = lane; blk < nblocks; blk += kLanes) {
      const int64_t end = (blk + 1) * kBlockLen < n_pos ? (blk + 1) * kBlockLen : n_pos;
      for (int64_t j = blk * kBlockLen; j < end; ++j) {
        acc = __fmaf_rn(p[j], vh[j * kv_stride + d], acc);
      }
    }
    partials[lane * head_dim + d] = acc;
  }
  __syncthreads();
  float* oh = out + (r * n_heads + h) * head_dim;
  for (int64_t d = tid; d < head_dim; d += kAttnThreads) {
    float v = partials[d];
    for (int lane = 1; lane < kLanes; ++lane) v = __fadd_rn(v, partials[lane * head_dim + d]);
    oh[d] = __fdiv_rn(v, total_sum);
  }
}

// ---- fast: online softmax, positions split over the warps ---------------------------

constexpr int kFastWarps = 4;
constexpr int kMaxDimsPerLane = 8;  // head_dim <= 256

__global__ void __launch_bounds__(kFastWarps * 32)
    FastAttentionKernel(const float* __restrict__ q, RowSource src, int64_t n_heads,
                        int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* __restrict__ out) {
  __shared__ float s_max[kFastWarps];
  __shared__ float s_den[kFastWarps];
  __shared__ float s_acc[kFastWarps][kMaxDimsPerLane * 32];
  const int64_t h = blockIdx.x;
  const int64_t r = blockIdx.y;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const float* k_cache;
  const float* v_cache;
  int64_t pos;
  src.Get(r, &k_cache, &v_cache, &pos);
  const int64_t kvh = h / (n_heads / n_kv_heads);
  const int64_t kv_stride = n_kv_heads * head_dim;
  const float* qh = q + (r * n_heads + h) * head_dim;
  const int dims = static_cast<int>((head_dim + 31) / 32);
  float qv[kMaxDimsPerLane];
  float acc[kMaxDimsPerLane];
  for (int i = 0; i < kMaxDimsPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    qv[i] = (i < dims && d < head_dim) ? qh[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float running_max = -INFINITY;
  float denom = 0.0f;
  for (int64_t j = warp; j <= pos; j += kFastWarps) {
    const float* kj = k_cache + j * kv_stride + kvh * head_dim;
    const float* vj = v_cache + j * kv_stride + kvh * head_dim;
    float s = 0.0f;
    for (int i = 0; i < dims; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < head_dim) s += qv[i] * kj[d];
    }
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    s *= scale;
    const float new_max = fmaxf(running_max, s);
    const float correction = __expf(running_max - new_max);
    const float pj = __expf(s - new_max);
    denom = denom * correction + pj;
    for (int i = 0; i < dims; ++i) {
      const int64_t d = lane + 32 * i;
      acc[i] = acc[i] * correction + (d < head_dim ? pj * vj[d] : 0.0f);
    }
    running_max = new_max;
  }
  if (lane == 0) {
    s_max[warp] = running_max;
    s_den[warp] = denom;
  }
  for (int i = 0; i < dims; ++i) s_acc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  float mx = s_max[0];
  for (int w = 1; w < kFastWarps; ++w) mx = fmaxf(mx, s_max[w]);
  float den = 0.0f;
  float weights[kFastWarps];
  for (int w = 0; w < kFastWarps; ++w) {
    weights[w] = s_max[w] == -INFINITY ? 0.0f : __expf(s_max[w] - mx);
    den += s_den[w] * weights[w];
  }
  float* oh = out + (r * n_heads + h) * head_dim;
  for (int i = 0; i < dims; ++i) {
    const int64_t d = lane + 32 * i;
    if (d >= head_dim) continue;
    float v = 0.0f;
    for (int w = 0; w < kFastWarps; ++w) v += s_acc[w][lane + 32 * i] * weights[w];
    oh[d] = v / den;
  }
}

float Scale(int64_t head_dim) {
  // Host IEEE float: the same expression and rounding as the CPU reference.
  return 1.0f / std::sqrt(static_cast<float>(head_dim));
}

void Launch(const CudaContext& ctx, const float* q, int64_t rows, const RowSource& src,
            int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* scratch,
            int64_t scratch_stride, float* out) {
  if (rows <= 0 || n_heads <= 0) return;
  const dim3 grid(static_cast<unsigned int>(n_heads), static_cast<unsigned int>(rows));
  if (ctx.numerics == Numerics::kFast) {
    FastAttentionKernel<<<grid, kFastWarps * 32, 0, ctx.stream>>>(q, src, n_heads, n_kv_heads,
                                                                  head_dim, Scale(head_dim), out);
  } else {
    const size_t smem = sizeof(float) * kLanes * static_cast<size_t>(head_dim);
    CanonicalAttentionKernel<<<grid, kAttnThreads, smem, ctx.stream>>>(
        q, src, n_heads, n_kv_heads, head_dim, Scale(head_dim), scratch, scratch_stride, out);
  }
}

}  // namespace

void Attention(const CudaContext& ctx, const float* q, const float* k_cache, const float* v_cache,
               int64_t pos, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float* scratch,
               float* out) {
  RowSource src;
  src.k0 = k_cache;
  src.v0 = v_cache;
  src.pos0 = pos;
  Launch(ctx, q, 1, src, n_heads, n_kv_heads, head_dim, scratch, pos + 1, out);
}

void AttentionRows(const CudaContext& ctx, const float* q, int64_t rows,
                   const float* const* k_caches, const float* const* v_caches,
                   const int32_t* positions, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                   float* scratch, int64_t scratch_stride, float* out) {
  RowSource src;
  src.k_caches = k_caches;
  src.v_caches = v_caches;
  src.positions = positions;
  Launch(ctx, q, rows, src, n_heads, n_kv_heads, head_dim, scratch, scratch_stride, out);
}

}  // namespace trace::kernels::cuda
