// The CUDA twins of kernels/kernels.h: the same ops and arguments, over device memory,
// enqueued on a stream. In canonical numerics each result is bit for bit the CPU
// canonical kernel's (docs/numerics.md, docs/cuda.md); in fast numerics MatMul calls
// cuBLAS (bf16 tensor cores, default heuristics) and Attention is a conventional
// online-softmax kernel.
//
// Ownership: kernels never own memory; every pointer (WeightView::data included) is
// device memory owned by the caller, except where a comment says host. Thread safety:
// calls on distinct streams with distinct outputs may run concurrently; a CudaContext and
// its workspace are used by one stream at a time. Errors: kernels do not fail; shapes are
// the caller's contract; launch errors surface at the caller's next CUDA_CHECK / sync.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

namespace trace::kernels::cuda {

struct CudaContext {
  Numerics numerics = Numerics::kCanonical;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;  // fast MatMul only; bound to `stream` by the caller
  // Fast MatMul converts activations to the weight dtype here: at least M * K * 2 bytes
  // for bf16/f16 weights.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// y[m, n] = dot(x[m, :], w[n, :]) (+ bias[n]). Canonical: M <= 8 runs the warp-per-row
// GEMV, larger M the tiled GEMM; both visit each element's products in the same order.
void MatMul(const CudaContext& ctx, const float* x, int64_t M, const WeightView& w,
            const float* bias, float* y);

// The two canonical matmul kernels, exposed so tests can check they agree for any M.
void CanonicalGemv(cudaStream_t stream, const float* x, int64_t M, const WeightView& w,
                   const float* bias, float* y);
void CanonicalGemm(cudaStream_t stream, const float* x, int64_t M, const WeightView& w,
                   const float* bias, float* y);

void RmsNorm(const CudaContext& ctx, const float* x, int64_t M, int64_t n, const WeightView& weight,
             float eps, float* out);

// ids: device int32 [M].
// out = f32(table rows) times `scale` when it is not 1 (kernels::Embedding).
void Embedding(const CudaContext& ctx, const WeightView& table, const int32_t* ids, int64_t M,
               float* out, float scale = 1.0f);

// positions: device int32 [M]; cos_table/sin_table: device copies of the host tables
// (kernels::MakeRopeTables), [max_pos, head_dim / 2].
void Rope(const CudaContext& ctx, float* x, int64_t M, int64_t n_heads, int64_t head_dim,
          const int32_t* positions, const float* cos_table, const float* sin_table);

void SiluMul(const CudaContext& ctx, const float* gate, const float* up, int64_t n, float* out);
void GeluTanhMul(const CudaContext& ctx, const float* gate, const float* up, int64_t n, float* out);

void Add(const CudaContext& ctx, const float* a, const float* b, int64_t n, float* y);

// out[i] = Exp(x[i]), the engine's exp on the device (for tests of the polynomial).
void ExpElementwise(cudaStream_t stream, const float* x, int64_t n, float* out);

// One query row against one sequence's cache, as kernels::Attention. `scratch` (device)
// holds at least n_heads * (pos + 1) floats.
void Attention(const CudaContext& ctx, const float* q, const float* k_cache, const float* v_cache,
               int64_t pos, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
               float* scratch, float* out);

// Many query rows at once (a batched forward): row r reads q + r * n_heads * head_dim,
// attends to k_caches[r] / v_caches[r] over positions 0..positions[r] (window > 0: only the
// last `window` of them) and writes out + r * n_heads * head_dim. k_caches, v_caches,
// positions: device arrays [rows]. scratch (device): rows * n_heads * scratch_stride floats,
// scratch_stride > max position.
void AttentionRows(const CudaContext& ctx, const float* q, int64_t rows,
                   const float* const* k_caches, const float* const* v_caches,
                   const int32_t* positions, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                   float scale, int64_t window, float* scratch, int64_t scratch_stride, float* out);

// ---- mixture of experts (kernels/cuda/schedule/moe.h; docs/cuda.md) ------------------------
// The route of M rows over E experts (kernels::MoeRoute: canonical, or fast's capacity-limited
// routing). Scratch (device): probs [M, E]; fast numerics also rank [M, k] and load [E].
struct MoeRouteScratch {
  float* probs = nullptr;
  int32_t* rank = nullptr;
  int32_t* load = nullptr;
};
void MoeRoute(const CudaContext& ctx, const float* logits, int64_t M, int64_t E, int64_t k,
              bool normalize, const MoeRouteScratch& scratch, int32_t* ids, float* weights);
// Groups the `slots` (row, slot) pairs by expert: offsets [E + 1], order [slots] (device).
void MoeGroup(const CudaContext& ctx, const int32_t* ids, int64_t slots, int64_t E,
              int32_t* offsets, int32_t* order);
// y[s, :] = expert ids[s]'s matrix times x's row s / x_per_row, for every slot s placed in
// `order` (dropped slots are left alone). weights: device array [E] of [N, K] matrices in
// `dtype`; vector_ok: schedule::GemvVectorOk holds for all of them and x.
void MoeExpertMatMul(const CudaContext& ctx, const float* x, int64_t x_per_row,
                     const int32_t* order, const int32_t* ids, int64_t slots,
                     const void* const* weights, DType dtype, int64_t N, int64_t K, bool vector_ok,
                     float* y);
// kernels::MoeCombine and kernels::MoeAddShared on the device.
void MoeCombine(const CudaContext& ctx, const float* expert_out, const int32_t* ids,
                const float* weights, int64_t M, int64_t k, int64_t n, float* out);
void MoeAddShared(const CudaContext& ctx, const float* shared_out, const float* gate_logits,
                  int64_t M, int64_t n, float* out);

}  // namespace trace::kernels::cuda
