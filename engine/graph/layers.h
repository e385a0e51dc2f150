// The decoder's layers, written once for every backend (the ggml way: one graph, per-backend
// ops). RunLayers<Ops> is the transformer forward pass over one pass of rows: embedding, then
// per layer the attention block (norm, q/k/v with biases, Qwen3/Gemma q/k norms, RoPE, cache
// append, attention, o_proj, Gemma's output norm, residual) and the feed-forward block (norm,
// FFN: SwiGLU, GeGLU or experts, Gemma's output norm, residual).
// engine/cpu (CpuOps) and engine/cuda (CudaOps) supply memory and kernels; the order of the
// ops, and so every bit of the result, is decided here.
//
// The ops a backend supplies are the concepts LayerOps and SupportsMoe below, each op listed
// once with its contract; both backends static_assert them.
//
// Ownership: the graph owns nothing; Ops owns its buffers. Thread safety: as the engine
// (one thread drives it). Errors: from AfterLayer (a failed launch, a failed copy).
#pragma once

#include <concepts>
#include <cstdint>

#include "base/status.h"
#include "engine/engine.h"
#include "engine/model_weights.h"

namespace trace::engine::graph {

// The activations of one pass of `rows` rows, in backend memory.
struct PassBuffers {
  float* x = nullptr;     // [rows, hidden]: the residual stream
  float* h = nullptr;     // [rows, hidden]: normed input / block output
  float* q = nullptr;     // [rows, heads * head_dim]
  float* k = nullptr;     // [rows, kv_heads * head_dim]
  float* v = nullptr;     // [rows, kv_heads * head_dim]
  float* attn = nullptr;  // [rows, heads * head_dim]
  float* gate = nullptr;  // [rows, intermediate]
  float* up = nullptr;    // [rows, intermediate]
  // Mixture of experts (null for dense models); k = num_experts_per_tok.
  float* router = nullptr;         // [rows, num_experts]: router logits
  int32_t* route_ids = nullptr;    // [rows, k]: chosen experts, ascending id
  float* route_weights = nullptr;  // [rows, k]
  float* expert_out = nullptr;     // [rows, k, hidden]: each chosen expert's output
  // qwen2_moe's shared expert (gate/up hold its intermediate: they are at least
  // max(intermediate, shared_expert_intermediate_size) wide).
  float* shared_out = nullptr;   // [rows, hidden]
  float* shared_gate = nullptr;  // [rows]: its gate logit
};

// The layer ops of a backend. Every pointer is backend memory (host for the CPU, device for
// CUDA), so the graph may offset it but never dereferences it; `rows` is the pass's rows. An
// op that fails (a launch, a copy) reports it at the next AfterLayer.
template <class Ops>
concept LayerOps = requires(Ops& ops, const float* x, const float* y, float* out, int64_t n,
                            const kernels::WeightView& w, float eps, const int32_t* route_ids) {
  // out[rows, hidden] = the embedding rows of the pass's token ids, times embedding_scale.
  { ops.Embedding(n, out) } -> std::same_as<void>;
  // out[rows, width] = RMSNorm of each row of x[rows, width] with weight w and epsilon eps;
  // out may alias x.
  { ops.RmsNorm(x, n, n, w, eps, out) } -> std::same_as<void>;
  // out[rows, w.rows] = x[rows, w.cols] times w transposed, plus bias (null: none).
  { ops.MatMul(x, n, w, y, out) } -> std::same_as<void>;
  // out[rows, hidden] = the embedding rows of the pass's token ids times the config's
  // embedding_scale (above). RoPE in place on out[rows, heads, head_dim] for layer `layer`,
  // each row at its position in the pass, with the layer's table (ModelConfig::UsesLocalRope:
  // Gemma 3's local layers have their own base).
  { ops.Rope(n, out, n, n) } -> std::same_as<void>;
  // Appends the pass's k and v rows to layer `layer` of their sequences' KV caches.
  { ops.AppendKv(n, x, y) } -> std::same_as<void>;
  // out[rows, heads * head_dim] = attention of q over layer `layer`'s cache, each row seeing
  // its sequence's positions from ModelConfig::FirstVisiblePosition (0, or the start of a
  // sliding layer's window) up to its own, scaled by canonical::AttentionScale(
  // attention_scale_dim) (two-pass softmax, docs/numerics.md).
  { ops.Attention(n, x, n, out) } -> std::same_as<void>;
  // out[n] = a[n] + b[n]; out may alias a.
  { ops.Add(x, y, n, out) } -> std::same_as<void>;
  // out[n] = silu(gate[n]) * up[n]; out may alias gate.
  { ops.SiluMul(x, y, n, out) } -> std::same_as<void>;
  // out[n] = gelu_tanh(gate[n]) * up[n] (Gemma's GeGLU); out may alias gate.
  { ops.GeluTanhMul(x, y, n, out) } -> std::same_as<void>;
  // After layer `layer` (x: its output rows): launch checks, the layer probe and, after an
  // MoE layer, the route probe (route_ids: the layer's route [rows, k]; else null).
  { ops.AfterLayer(n, x, route_ids) } -> std::same_as<Status>;
};

// The mixture-of-experts ops (MoeFeedForward). A backend without them refuses MoE models at
// Engine::Create; k is num_experts_per_tok.
template <class Ops>
concept SupportsMoe = requires(Ops& ops, const MoeWeights& moe, const float* x, const float* y,
                               float* out, int32_t* ids, const int32_t* route_ids, int64_t n) {
  // Each row's route from its router logits x[rows, num_experts]: ids[rows, k] (ascending
  // id) and their weights out[rows, k] (softmax, top-k, optional renormalisation).
  { ops.MoeRoute(x, n, ids, out) } -> std::same_as<void>;
  // out[rows, k, hidden] = every (row, slot)'s expert SwiGLU of its row of x[rows, hidden].
  { ops.MoeExperts(moe, x, n, route_ids, out) } -> std::same_as<void>;
  // out[rows, hidden] = the route weights' sum of the experts' outputs x, in ascending id.
  { ops.MoeCombine(x, route_ids, y, n, out) } -> std::same_as<void>;
  // out[rows, hidden] += sigmoid(gate logit y[rows]) * shared expert output x (qwen2_moe).
  { ops.MoeAddShared(x, y, n, out) } -> std::same_as<void>;
};

template <class Ops>
void AttentionBlock(Ops& ops, const ModelConfig& c, const LayerWeights& lw, int64_t layer,
                    int64_t rows, const PassBuffers& b) {
  const int64_t H = c.hidden_size, D = c.head_dim;
  ops.RmsNorm(b.x, rows, H, lw.input_norm, c.rms_norm_eps, b.h);
  ops.MatMul(b.h, rows, lw.q_proj, lw.q_bias, b.q);
  ops.MatMul(b.h, rows, lw.k_proj, lw.k_bias, b.k);
  ops.MatMul(b.h, rows, lw.v_proj, lw.v_bias, b.v);
  if (c.qk_norm) {  // Qwen3: RMSNorm of every head of q and k, in place
    ops.RmsNorm(b.q, rows * c.num_heads, D, lw.q_norm, c.rms_norm_eps, b.q);
    ops.RmsNorm(b.k, rows * c.num_kv_heads, D, lw.k_norm, c.rms_norm_eps, b.k);
  }
  ops.Rope(layer, b.q, rows, c.num_heads);
  ops.Rope(layer, b.k, rows, c.num_kv_heads);
  ops.AppendKv(layer, b.k, b.v);
  ops.Attention(layer, b.q, rows, b.attn);
  ops.MatMul(b.attn, rows, lw.o_proj, nullptr, b.h);
  if (c.sandwich_norms) ops.RmsNorm(b.h, rows, H, lw.attn_out_norm, c.rms_norm_eps, b.h);
  ops.Add(b.x, b.h, rows * H, b.x);
}

// A mixture-of-experts feed-forward (docs/numerics.md "MoE routing"): router logits by the
// canonical MatMul, the route of each row (softmax, top-k by probability desc then id asc,
// optional renormalisation), each chosen expert's SwiGLU of its row (a backend may group
// rows by expert: every row's MatMul is computed from that row alone), and the weighted sum
// in ascending expert id; with a shared expert (qwen2_moe), its SwiGLU of every row and its
// gate logit, added last with weight sigmoid(gate logit). In = b.h, out = b.h. Every row's
// result is a function of its own hidden state in canonical numerics; nothing is capped or
// dropped.
template <class Ops>
void MoeFeedForward(Ops& ops, const ModelConfig& c, const MoeWeights& moe, int64_t rows,
                    const PassBuffers& b) {
  ops.MatMul(b.h, rows, moe.router, nullptr, b.router);
  ops.MoeRoute(b.router, rows, b.route_ids, b.route_weights);
  ops.MoeExperts(moe, b.h, rows, b.route_ids, b.expert_out);
  if (moe.has_shared_expert()) {  // from b.h, before the combine overwrites it
    const ExpertWeights& se = moe.shared_expert;
    ops.MatMul(b.h, rows, se.gate_proj, nullptr, b.gate);
    ops.MatMul(b.h, rows, se.up_proj, nullptr, b.up);
    ops.SiluMul(b.gate, b.up, rows * c.shared_expert_intermediate_size, b.gate);
    ops.MatMul(b.gate, rows, se.down_proj, nullptr, b.shared_out);
    ops.MatMul(b.h, rows, moe.shared_expert_gate, nullptr, b.shared_gate);
  }
  ops.MoeCombine(b.expert_out, b.route_ids, b.route_weights, rows, b.h);
  if (moe.has_shared_expert()) ops.MoeAddShared(b.shared_out, b.shared_gate, rows, b.h);
}

// The feed-forward network of one layer: in = the post-attention-normed rows (b.h), out =
// b.h. Dense SwiGLU: down(silu(gate(h)) * up(h)), or the mixture of experts of an MoE layer,
// with the norm and the residual around it unchanged.
template <class Ops>
void FeedForward(Ops& ops, const ModelConfig& c, const LayerWeights& lw, int64_t rows,
                 const PassBuffers& b) {
  if constexpr (SupportsMoe<Ops>) {
    if (!lw.moe.experts.empty()) {
      MoeFeedForward(ops, c, lw.moe, rows, b);
      return;
    }
  }
  ops.MatMul(b.h, rows, lw.gate_proj, nullptr, b.gate);
  ops.MatMul(b.h, rows, lw.up_proj, nullptr, b.up);
  if (c.hidden_activation == ModelConfig::Activation::kGeluTanh) {
    ops.GeluTanhMul(b.gate, b.up, rows * c.intermediate_size, b.gate);
  } else {
    ops.SiluMul(b.gate, b.up, rows * c.intermediate_size, b.gate);
  }
  ops.MatMul(b.gate, rows, lw.down_proj, nullptr, b.h);
}

template <class Ops>
void FeedForwardBlock(Ops& ops, const ModelConfig& c, const LayerWeights& lw, int64_t rows,
                      const PassBuffers& b) {
  const int64_t H = c.hidden_size;
  ops.RmsNorm(b.x, rows, H, lw.ffn_norm, c.rms_norm_eps, b.h);
  FeedForward(ops, c, lw, rows, b);
  if (c.sandwich_norms) ops.RmsNorm(b.h, rows, H, lw.ffn_out_norm, c.rms_norm_eps, b.h);
  ops.Add(b.x, b.h, rows * H, b.x);
}

// Embedding and every layer for one pass; the residual stream ends in b.x.
template <LayerOps Ops>
Status RunLayers(Ops& ops, const ModelConfig& c, const ModelWeights& w, int64_t rows,
                 const PassBuffers& b) {
  ops.Embedding(rows, b.x);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    AttentionBlock(ops, c, lw, l, rows, b);
    FeedForwardBlock(ops, c, lw, rows, b);
    const bool routed = SupportsMoe<Ops> && !lw.moe.experts.empty();
    TRACE_RETURN_IF_ERROR(ops.AfterLayer(l, b.x, routed ? b.route_ids : nullptr));
  }
  return Status::Ok();
}

}  // namespace trace::engine::graph
