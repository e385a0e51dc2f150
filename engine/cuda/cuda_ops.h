// The CUDA backend of the decoder graph (engine/graph): device memory and the kernels of
// kernels/cuda/cuda_kernels.h on one stream. The order of the ops is the graph's, so in
// canonical numerics every logit is the CPU engine's bit for bit. Each pass's layers run as
// one CUDA graph per pass shape (graph_cache.h) unless EngineOptions::cuda_graphs is off or
// a layer probe is attached.
//
// Ownership: CudaOps owns the device copy of the weights (uploaded once in their stored
// dtype; a tied embedding shares one copy), the RoPE tables, the activations, the stream and
// the cuBLAS handle (fast numerics only); each sequence's Cache owns its device KV buffer. Thread
// safety: one thread drives it; Activate() makes the device current on that thread. Errors: Status
// naming the CUDA call, file and line, or the buffer that did not fit.
#pragma once

#include <cublas_v2.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/cuda/graph_cache.h"
#include "engine/engine.h"
#include "engine/graph/decoder_engine.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device.h"

namespace trace::engine {

// One sequence's KV cache on the device: [layer][k|v][capacity][kv_heads * head_dim] f32.
struct CudaKvCache {
  kernels::cuda::DeviceBuffer buffer;
};

// A device buffer that only grows; `generation` counts reallocations (CUDA graphs capture
// addresses).
class DeviceScratch {
 public:
  // Grows to at least `bytes`; *moved is set when the address changed.
  Status Reserve(size_t bytes, const char* what, bool* moved);
  template <typename T>
  T* as() const {
    return buffer_.as<T>();
  }
  size_t bytes() const { return buffer_.bytes(); }

 private:
  kernels::cuda::DeviceBuffer buffer_;
};

class CudaOps {
 public:
  using Cache = CudaKvCache;
  using Seq = graph::Sequence<Cache>;
  using PassT = graph::Pass<Cache>;

  // Uploads the weights and tables to device `ordinal`. `options` has its context clamped.
  static Result<std::unique_ptr<CudaOps>> Create(std::shared_ptr<const Model> model,
                                                 const EngineOptions& options, int ordinal);
  ~CudaOps();

  // The memory, passes and logits: graph::Backend (graph/decoder_engine.h), contracts there.
  std::string DeviceDescription() const { return description_; }
  const ModelWeights& weights() const { return weights_; }
  Status Activate();

  Status GrowCache(Seq* s, int64_t capacity);
  Status CopyCache(const Seq& from, Seq* to, int64_t n);

  int64_t MaxRowsPerPass() const { return 1024; }
  bool PassFits(int64_t rows, int64_t max_position) const;
  Status BeginPass(const PassT& pass, const LayerProbe* probe, const RouteProbe* route_probe,
                   graph::PassBuffers* buffers);
  template <class F>
  Status RunPass(F&& run_layers) {
    if (probe_ != nullptr || route_probe_ != nullptr)
      return run_layers();  // the probe copies to the host per layer
    return graphs_.Run(stream_.get(), cuda::GraphKey{rows_, scratch_stride_, generation_},
                       [&]() { return run_layers(); });
  }
  Status EndPass(const PassT& pass, const float* x);
  Status ReserveOutputRows(int64_t rows);
  int64_t MaxLogitRowsPerChunk() const { return 256; }
  Status Logits(int64_t first, int64_t rows, float* host_logits);

  // The layer ops: graph::LayerOps (graph/layers.h), contracts there.
  void Embedding(int64_t rows, float* out);
  void RmsNorm(const float* x, int64_t rows, int64_t width, const kernels::WeightView& w, float eps,
               float* out);
  void MatMul(const float* x, int64_t rows, const kernels::WeightView& w, const float* bias,
              float* y);
  void Rope(int64_t layer, float* x, int64_t rows, int64_t heads);
  void AppendKv(int64_t layer, const float* k, const float* v);
  void Attention(int64_t layer, const float* q, int64_t rows, float* out);
  void Add(const float* a, const float* b, int64_t n, float* y);
  void SiluMul(const float* gate, const float* up, int64_t n, float* out);
  void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
  // graph::SupportsMoe (graph/layers.h; kernels/cuda/schedule/moe.h): the route, the
  // grouping by expert and the experts' matrices all stay on the device.
  void MoeRoute(const float* logits, int64_t rows, int32_t* ids, float* weights);
  void MoeExperts(const MoeWeights& moe, const float* h, int64_t rows, const int32_t* ids,
                  float* expert_out);
  void MoeCombine(const float* expert_out, const int32_t* ids, const float* weights, int64_t rows,
                  float* out);
  void MoeAddShared(const float* shared_out, const float* gate_logits, int64_t rows, float* out);
  Status AfterLayer(int64_t layer, const float* x, const int32_t* route_ids);

  const cuda::GraphStats& graph_stats() const { return graphs_.stats(); }

 private:
  CudaOps(std::shared_ptr<const Model> model, const EngineOptions& options, int ordinal);
  Status Init();
  int64_t KvWidth() const { return config_.num_kv_heads * config_.head_dim; }
  float* KCache(const Seq& s, int64_t layer) const;
  float* VCache(const Seq& s, int64_t layer) const;
  Result<kernels::WeightView> Upload(const kernels::WeightView& host, const std::string& what);
  Result<const float*> UploadBias(const float* host, int64_t n, const std::string& what);
  // The RoPE tables of base `theta` with `scaling` into device buffers.
  Status UploadRopeTables(double theta, const kernels::RopeScaling& scaling,
                          const std::string& what, kernels::cuda::DeviceBuffer* cos,
                          kernels::cuda::DeviceBuffer* sin);
  Status Reserve(DeviceScratch* s, size_t bytes, const char* what);
  Status UploadMoe(const MoeWeights& host, const std::string& what, MoeWeights* dev);

  // One MoE layer's experts as device arrays of matrix pointers (for MoeExpertMatMul).
  struct ExpertTables {
    kernels::cuda::DeviceBuffer gate, up, down;  // [E] const void*
    bool vector_ok = false;  // every expert matrix 16-byte aligned (GemvVectorOk's part)
  };
  std::unordered_map<const MoeWeights*, ExpertTables> expert_tables_;  // by device MoeWeights

  std::shared_ptr<const Model> model_;
  const ModelConfig& config_;
  EngineOptions options_;
  int ordinal_ = 0;
  std::string description_;
  kernels::cuda::Stream stream_;
  cublasHandle_t cublas_ = nullptr;  // fast numerics only (kernels/cuda/cublas_loader.h)
  kernels::cuda::CudaContext ctx_;
  cuda::GraphCache graphs_;

  std::vector<kernels::cuda::DeviceBuffer> weight_buffers_;
  ModelWeights weights_;  // device views
  kernels::cuda::DeviceBuffer cos_, sin_, cublas_workspace_;
  kernels::cuda::DeviceBuffer local_cos_, local_sin_;  // Gemma 3's local layers

  // The current pass: its shape, per-row metadata on the device, activations.
  const PassT* pass_ = nullptr;
  const LayerProbe* probe_ = nullptr;
  const RouteProbe* route_probe_ = nullptr;
  int64_t rows_ = 0;
  int64_t scratch_stride_ = 0;
  int64_t generation_ = 0;  // bumped when a buffer captured by a graph moves
  std::vector<int32_t> host_tokens_, host_positions_;
  std::vector<float*> host_cache_ptrs_;
  std::vector<int32_t> host_gather_;
  std::vector<float> host_row_;      // probe copies
  std::vector<int32_t> host_route_;  // route probe copies
  DeviceScratch x_, h_, q_, k_, v_, attn_, gate_, up_, work_, attn_scratch_;
  DeviceScratch tokens_, positions_, cache_ptrs_, hidden_out_, gather_index_, logits_;
  // Mixture of experts: routes, grouping, expert activations, the shared expert.
  DeviceScratch router_, probs_, route_ids_, route_weights_, rank_, load_, offsets_, order_;
  DeviceScratch expert_gate_, expert_up_, expert_out_, shared_out_, shared_gate_;
};

static_assert(
    graph::Backend<CudaOps> && graph::SupportsMoe<CudaOps>,
    "CudaOps must supply every op of the decoder graph (graph/layers.h, decoder_engine.h)");

}  // namespace trace::engine
