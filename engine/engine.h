// The inference engine: a loaded model, per-sequence KV caches, and a batched forward
// pass whose logits for a sequence are, bit for bit, a function of (weights, token ids)
// alone in canonical numerics (docs/numerics.md) — whatever the batch, chunking,
// thread count or backend.
//
// Ownership: a Model is immutable once loaded and shared (std::shared_ptr) by engines.
// An Engine owns its sequences' KV caches. Thread safety: Model is safe to share across
// threads; an Engine is not thread-safe — one thread (the scheduler) drives it.
// Errors: Load/Create/Forward return Status; a bad model file names the file and tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model_weights.h"
#include "kernels/kernels.h"

namespace trace::engine {

// config.json, as far as the engine needs it.
struct ModelConfig {
  std::string architecture;  // "qwen3" | "qwen2" | "llama" | "mistral" | "qwen3_moe" |
                             // "qwen2_moe" | "mixtral" | "gemma3_text"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  kernels::RopeScaling rope_scaling;  // config.json "rope_scaling" (none, or Llama 3's)
  // `trace model init` only: the bundled tokenizer a preset is written with ("qwen3" |
  // "llama3" | "sentencepiece" | "gemma3"); not read from or written to config.json.
  std::string tokenizer_family = "qwen3";
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  bool attention_bias = false;                   // q/k/v bias (Qwen2)
  bool qk_norm = false;                          // per-head q/k RMSNorm (Qwen3)
  kernels::DType dtype = kernels::DType::kBF16;  // torch_dtype of the stored weights
  std::vector<int32_t> eos_token_ids;            // from config.json / generation_config.json

  // Mixture of experts (qwen3_moe, qwen2_moe, mixtral; docs/models.md "Mixture of experts"). Dense
  // models have num_experts == 0. A layer is an MoE layer when IsMoeLayer says so; the others
  // keep the dense SwiGLU of width intermediate_size.
  int64_t num_experts = 0;            // num_experts (qwen3_moe) / num_local_experts (mixtral)
  int64_t num_experts_per_tok = 0;    // k of the top-k
  int64_t moe_intermediate_size = 0;  // each expert's width (mixtral: intermediate_size)
  bool norm_topk_prob = false;        // divide the k probabilities by their sum (mixtral: always)
  int64_t decoder_sparse_step = 1;    // MoE in layers with (layer + 1) % step == 0
  std::vector<int64_t> mlp_only_layers;  // layers that stay dense whatever the step says
  // qwen2_moe: the shared expert's width (0: none). Every MoE layer then also runs one
  // shared SwiGLU expert on every row, scaled by sigmoid(shared_expert_gate(h)).
  int64_t shared_expert_intermediate_size = 0;

  // Attention windows, activations and norms beyond Llama's (gemma3_text, and mistral /
  // mixtral's sliding window; docs/models.md "Gemma 3" and "Sliding-window attention").
  enum class Activation { kSilu, kGeluTanh };
  Activation hidden_activation = Activation::kSilu;  // silu (SwiGLU) or gelu_pytorch_tanh
  // The attention scale is canonical::AttentionScale(attention_scale_dim): head_dim unless
  // the config names query_pre_attn_scalar (Gemma).
  int64_t attention_scale_dim = 0;
  // 0: full causal attention. Else a sliding layer's row at position p sees positions
  // p - sliding_window + 1 .. p (transformers' `kv_idx > q_idx - sliding_window`).
  int64_t sliding_window = 0;
  // Which layers slide (1) and which attend globally (0), one entry per layer (Gemma 3: its
  // local layers, which also use the local RoPE, with or without a window); empty means every
  // layer slides when sliding_window > 0 (Mistral).
  std::vector<uint8_t> sliding_layers;
  // Gemma 3: the sliding layers' RoPE base (rope_local_base_freq, no scaling); 0: every layer
  // uses rope_theta and rope_scaling.
  double rope_local_theta = 0.0;
  bool norm_unit_offset = false;  // RMSNorm multiplies by 1 + stored weight (Gemma)
  // A Gemma 3 checkpoint with a vision tower (model_type gemma3): the config is its
  // text_config, the tensors its language model's (engine/model.cc), the rest unused.
  bool multimodal_wrapper = false;
  // Gemma: the attention and feed-forward outputs are normed (post_attention_layernorm,
  // post_feedforward_layernorm) before their residual adds.
  bool sandwich_norms = false;
  float embedding_scale = 1.0f;      // Gemma: sqrt(hidden) rounded to the weights' dtype
  float final_logit_softcap = 0.0f;  // 0: none; else logits = cap * tanh(logits / cap)

  // Whether `layer` is a sliding (local) layer: as sliding_layers says, or every layer when
  // that is empty and there is a window.
  bool IsSlidingLayer(int64_t layer) const {
    if (sliding_layers.empty()) return sliding_window > 0;
    return layer >= 0 && layer < static_cast<int64_t>(sliding_layers.size()) &&
           sliding_layers[static_cast<size_t>(layer)] != 0;
  }
  // The first position a row at `pos` attends to in `layer`.
  int64_t FirstVisiblePosition(int64_t layer, int64_t pos) const {
    return sliding_window > 0 && IsSlidingLayer(layer) && pos >= sliding_window
               ? pos - sliding_window + 1
               : 0;
  }
  // Whether `layer` rotates with the local RoPE table (Gemma 3's sliding layers).
  bool UsesLocalRope(int64_t layer) const { return rope_local_theta > 0 && IsSlidingLayer(layer); }

  bool IsMoeLayer(int64_t layer) const {
    if (num_experts <= 0 || decoder_sparse_step <= 0) return false;
    for (int64_t l : mlp_only_layers) {
      if (l == layer) return false;
    }
    return (layer + 1) % decoder_sparse_step == 0;
  }
};

// What identifies a model: recorded in every run, checked on replay.
struct ModelFingerprint {
  std::string architecture;
  std::string dtype;
  int64_t parameter_count = 0;
  std::string weights_sha256;        // over the safetensors files in name order
  std::string config_sha256;         // config.json bytes
  std::string tokenizer_sha256;      // tokenizer.json bytes
  std::string chat_template_sha256;  // the chat_template string
};

class Model {
 public:
  virtual ~Model() = default;
  // Loads a Hugging Face model folder: config.json, model.safetensors or sharded
  // (model.safetensors.index.json), memory-mapped; or a GGUF file (engine/gguf_model.h). Computing
  // the weights hash reads every byte once; `hash_weights = false` skips it
  // (fingerprint().weights_sha256 empty).
  static Result<std::shared_ptr<const Model>> Load(const std::string& dir,
                                                   bool hash_weights = true);
  virtual const std::string& dir() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual const ModelFingerprint& fingerprint() const = 0;
  // The tensors, memory-mapped in their stored dtype (for the backends).
  virtual const ModelWeights& weights() const = 0;
};

// What Engine::Create is asked for; Engine::options() returns them resolved.
struct EngineOptions {
  kernels::Numerics numerics = kernels::Numerics::kCanonical;
  kernels::Impl impl = kernels::Impl::kAuto;  // kReference: scalar reference kernels
  int threads = 0;                            // 0: hardware concurrency
  std::string device = "cpu";                 // "cpu" | "cuda" | "cuda:N"
  int64_t max_context = 0;                    // per sequence; 0: the model's maximum
  // CUDA: run each pass's layers as one CUDA graph per pass shape (same kernels, same bits;
  // far fewer launches). Off: launch every kernel (to measure the difference).
  bool cuda_graphs = true;
};

using SeqId = int64_t;

// One entry of a batched forward: append `tokens` to sequence `seq` and return logits
// at the indices `logits_at` (0-based indices into `tokens`, ascending).
struct BatchItem {
  SeqId seq = 0;
  std::span<const int32_t> tokens;
  std::vector<int32_t> logits_at;
};

// Logits of one Forward call: rows in the order of the requests (item by item, then by
// logits_at), each vocab_size floats.
struct ForwardOutput {
  int64_t vocab_size = 0;
  std::vector<float> logits;  // [rows, vocab_size]
  std::span<const float> row(size_t i) const {
    return {logits.data() + i * vocab_size, static_cast<size_t>(vocab_size)};
  }
};

// Optional per-layer probe: called with (item index, token index within the item, layer,
// the hidden state after that layer [hidden_size]) for rows whose logits were asked for.
using LayerProbe =
    std::function<void(size_t item, int32_t token_index, int layer, std::span<const float>)>;
// Optional route probe (mixture-of-experts models): called after each MoE layer with (item
// index, token index within the item, layer, the experts that row was routed to: the
// config's num_experts_per_tok ids, ascending; -1 for a slot dropped by fast numerics'
// capacity) for rows whose logits were asked for. Dense layers are not reported.
using RouteProbe =
    std::function<void(size_t item, int32_t token_index, int layer, std::span<const int32_t>)>;

class Engine {
 public:
  virtual ~Engine() = default;
  static Result<std::unique_ptr<Engine>> Create(std::shared_ptr<const Model> model,
                                                const EngineOptions& options);

  virtual const Model& model() const = 0;
  // The options the engine runs with, resolved by Create, so callers use them as they are:
  // max_context is the value asked for, or the model's max_position_embeddings where 0 or
  // more than that was asked; threads is >= 1 (0 asked for the hardware's concurrency; a
  // CUDA engine says 1).
  virtual const EngineOptions& options() const = 0;
  // "cpu avx2" / "cuda:0 NVIDIA H200": what ran the kernels.
  virtual std::string DeviceDescription() const = 0;

  virtual SeqId NewSequence() = 0;
  virtual void FreeSequence(SeqId seq) = 0;
  // A new sequence whose cache holds a copy of the first `n_tokens` of `src` (prefix reuse).
  virtual Result<SeqId> ForkSequence(SeqId src, int64_t n_tokens) = 0;
  // Drops cached positions >= n_tokens.
  virtual Status Truncate(SeqId seq, int64_t n_tokens) = 0;
  virtual int64_t Length(SeqId seq) const = 0;

  // Runs all items in one batched forward pass (any mix of prefill chunks and decode
  // steps, any lengths). Canonical numerics: each item's logits are bitwise independent
  // of the other items and of how its tokens were chunked across calls.
  virtual Status Forward(std::span<const BatchItem> items, ForwardOutput* out,
                         const LayerProbe* probe = nullptr,
                         const RouteProbe* route_probe = nullptr) = 0;
};

}  // namespace trace::engine
