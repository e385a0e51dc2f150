// The CPU backend of the decoder graph (engine/graph): host memory and the kernels of
// kernels/kernels.h (AVX2 or the scalar reference, on a thread pool). The order of the ops
// is the graph's; this file only says where the tensors live and which kernel runs each op.
//
// Ownership: CpuOps owns the repacked weights (kInterleaved32 copies), the RoPE tables, the
// thread pool and the activations; the Model outlives it. Thread safety: one thread drives
// it (the engine's). Errors: allocation failures of the weight copies fall back to the
// mapped row-major weights; nothing else fails.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/graph/decoder_engine.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"

namespace trace::engine {

// One sequence's KV cache on the host: per layer [capacity, kv_heads, head_dim] floats.
struct CpuKvCache {
  std::vector<std::vector<float>> k;
  std::vector<std::vector<float>> v;
};

class CpuOps {
 public:
  using Cache = CpuKvCache;
  using Seq = graph::Sequence<Cache>;
  using PassT = graph::Pass<Cache>;

  // `options` has its context clamped and its thread count resolved (0: all cores).
  CpuOps(std::shared_ptr<const Model> model, const EngineOptions& options);

  // The memory, passes and logits: graph::Backend (graph/decoder_engine.h), contracts there.
  std::string DeviceDescription() const;
  const ModelWeights& weights() const { return weights_; }
  Status Activate() { return Status::Ok(); }

  Status GrowCache(Seq* s, int64_t capacity);
  Status CopyCache(const Seq& from, Seq* to, int64_t n);

  // Rows per pass: bounds the activation memory of a long prefill.
  int64_t MaxRowsPerPass() const { return 256; }
  bool PassFits(int64_t, int64_t) const { return true; }
  Status BeginPass(const PassT& pass, const LayerProbe* probe, const RouteProbe* route_probe,
                   graph::PassBuffers* buffers);
  template <class F>
  Status RunPass(F&& run_layers) {
    return run_layers();
  }
  Status EndPass(const PassT& pass, const float* x);
  Status ReserveOutputRows(int64_t rows);
  int64_t MaxLogitRowsPerChunk() const { return int64_t{1} << 30; }  // all at once
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
  // graph::SupportsMoe (graph/layers.h).
  void MoeRoute(const float* logits, int64_t rows, int32_t* ids, float* weights);
  // Groups the (row, slot) pairs by expert, gathers each expert's rows into one block, runs
  // its SwiGLU as three MatMuls over the block and scatters the results back to their slots:
  // the same bits per row as running each row alone (MatMul rows are independent).
  void MoeExperts(const MoeWeights& moe, const float* h, int64_t rows, const int32_t* ids,
                  float* expert_out);
  void MoeCombine(const float* expert_out, const int32_t* ids, const float* weights, int64_t rows,
                  float* out);
  void MoeAddShared(const float* shared_out, const float* gate_logits, int64_t rows, float* out);
  Status AfterLayer(int64_t layer, const float* x, const int32_t* route_ids);

 private:
  int64_t KvWidth() const { return config_.num_kv_heads * config_.head_dim; }
  void RepackWeights();

  std::shared_ptr<const Model> model_;
  const ModelConfig& config_;
  EngineOptions options_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  kernels::KernelContext ctx_;
  ModelWeights weights_;  // the model's views, matrices repointed at repacked_ copies
  std::vector<std::unique_ptr<void, decltype(&std::free)>> repacked_;
  std::vector<float> cos_, sin_;
  std::vector<float> local_cos_, local_sin_;  // Gemma 3's local layers (rope_local_theta)
  // The current pass (BeginPass .. EndPass).
  const PassT* pass_ = nullptr;
  const LayerProbe* probe_ = nullptr;
  const RouteProbe* route_probe_ = nullptr;
  std::vector<int32_t> tokens_, positions_;
  // Activations of one pass, reused; the final hidden state of each asked-for row.
  std::vector<float> x_, h_, q_, k_, v_, attn_, gate_, up_;
  std::vector<float> final_hidden_;
  // Mixture of experts: the pass's routes and expert outputs, and one expert's block.
  std::vector<float> router_, route_weights_, expert_out_, shared_out_, shared_gate_;
  std::vector<int32_t> route_ids_;
  std::vector<float> block_x_, block_gate_, block_up_, block_y_;
  std::vector<std::vector<int64_t>> expert_slots_;  // per expert: row * k + slot
};

static_assert(
    graph::Backend<CpuOps> && graph::SupportsMoe<CpuOps>,
    "CpuOps must supply every op of the decoder graph (graph/layers.h, decoder_engine.h)");

}  // namespace trace::engine
