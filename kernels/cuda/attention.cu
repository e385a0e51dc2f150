// Attention over a sequence's KV cache, one block per (head, query row).
// Canonical: CanonicalAttentionKernel runs schedule/attention.h AttentionBlock (two passes:
// scores and the exact max, Exp(s - max), the canonical sum over positions and the lane
// partials of the weighted sum of V folded in lane order; the work decomposition is written
// there, host-callable, and the CPU tests run it over a simulated grid). No online
// rescaling, so a position gets the same bits in prefill and decode.
// Fast: a conventional online-softmax kernel (warps split the positions, butterfly
// reductions, __expf), free to reorder sums.
#include <cmath>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_block.cuh"
#include "kernels/cuda/schedule/attention.h"

namespace trace::kernels::cuda {
namespace {

namespace sc = schedule;

__global__ void __launch_bounds__(sc::kAttentionThreads)
    CanonicalAttentionKernel(sc::AttentionArgs args) {
  extern __shared__ float shared[];  // sc::AttentionSharedFloats(head_dim)
  DeviceBlock block;
  sc::AttentionBlock(block, blockIdx.x, blockIdx.y, args, shared);
}

// ---- fast: online softmax, positions split over the warps ---------------------------

constexpr int kFastWarps = 4;
constexpr int kMaxDimsPerLane = 8;  // head_dim <= 256

__global__ void __launch_bounds__(kFastWarps * 32) FastAttentionKernel(sc::AttentionArgs args) {
  __shared__ float s_max[kFastWarps];
  __shared__ float s_den[kFastWarps];
  __shared__ float s_acc[kFastWarps][kMaxDimsPerLane * 32];
  const int64_t h = blockIdx.x;
  const int64_t r = blockIdx.y;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const sc::AttentionRowCache row = sc::RowCache(args, r);
  const float* k_cache = row.k;
  const float* v_cache = row.v;
  const int64_t pos = row.pos;
  const int64_t n_heads = args.heads, n_kv_heads = args.kv_heads, head_dim = args.head_dim;
  const float scale = args.scale;
  const float* q = args.q;
  float* out = args.out;
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

void Launch(const CudaContext& ctx, int64_t rows, const sc::AttentionArgs& args) {
  if (rows <= 0 || args.heads <= 0) return;
  const sc::LaunchDims dims = sc::AttentionLaunch(rows, args.heads, args.head_dim);
  const dim3 grid(dims.grid_x, dims.grid_y);
  if (ctx.numerics == Numerics::kFast) {
    FastAttentionKernel<<<grid, kFastWarps * 32, 0, ctx.stream>>>(args);
  } else {
    CanonicalAttentionKernel<<<grid, dims.block, dims.shared_bytes, ctx.stream>>>(args);
  }
}

// The arguments both entry points share.
sc::AttentionArgs Args(const float* q, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                       float scale, float* scratch, int64_t scratch_stride, float* out) {
  sc::AttentionArgs args;
  args.q = q;
  args.heads = n_heads;
  args.kv_heads = n_kv_heads;
  args.head_dim = head_dim;
  args.scale = scale;
  args.scratch = scratch;
  args.scratch_stride = scratch_stride;
  args.out = out;
  return args;
}

}  // namespace

void Attention(const CudaContext& ctx, const float* q, const float* k_cache, const float* v_cache,
               int64_t pos, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
               float* scratch, float* out) {
  sc::AttentionArgs args = Args(q, n_heads, n_kv_heads, head_dim, scale, scratch, pos + 1, out);
  args.k0 = k_cache;
  args.v0 = v_cache;
  args.pos0 = pos;
  Launch(ctx, 1, args);
}

void AttentionRows(const CudaContext& ctx, const float* q, int64_t rows,
                   const float* const* k_caches, const float* const* v_caches,
                   const int32_t* positions, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                   float scale, int64_t window, float* scratch, int64_t scratch_stride,
                   float* out) {
  sc::AttentionArgs args =
      Args(q, n_heads, n_kv_heads, head_dim, scale, scratch, scratch_stride, out);
  args.window = window;
  args.k_caches = k_caches;
  args.v_caches = v_caches;
  args.positions = positions;
  Launch(ctx, rows, args);
}

}  // namespace trace::kernels::cuda
