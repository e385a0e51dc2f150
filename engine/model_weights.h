// The tensors of a loaded transformer, as views into the memory-mapped safetensors files:
// what every backend (engine/cpu, engine/cuda: the decoder graph of engine/graph) runs the
// forward pass over.
//
// Ownership: views only; the Model that hands them out owns the mappings and the few f32
// copies (biases; Gemma's norm weights, 1 + stored), and outlives every engine using them. Thread
// safety: immutable, safe to share. Errors: none here; Model::Load validated every name, dtype and
// shape.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace trace::engine {

// One expert of a mixture (or the dense SwiGLU): down(silu(gate(h)) * up(h)).
struct ExpertWeights {
  kernels::WeightView gate_proj;  // [width, hidden]
  kernels::WeightView up_proj;    // [width, hidden]
  kernels::WeightView down_proj;  // [hidden, width]
};

// The mixture-of-experts block of one layer (empty `experts` for a dense layer).
struct MoeWeights {
  kernels::WeightView router;  // [num_experts, hidden]: `mlp.gate` / `block_sparse_moe.gate`
  std::vector<ExpertWeights> experts;  // by expert id
  // qwen2_moe's shared expert (data null without one): `mlp.shared_expert.{gate,up,down}_proj`
  // of width shared_expert_intermediate_size, and its gate `mlp.shared_expert_gate` [1, hidden].
  ExpertWeights shared_expert;
  kernels::WeightView shared_expert_gate;
  bool has_shared_expert() const { return shared_expert_gate.data != nullptr; }
};

struct LayerWeights {
  kernels::WeightView input_norm;  // [hidden]
  kernels::WeightView q_proj;      // [heads * head_dim, hidden]
  kernels::WeightView k_proj;      // [kv_heads * head_dim, hidden]
  kernels::WeightView v_proj;      // [kv_heads * head_dim, hidden]
  kernels::WeightView o_proj;      // [hidden, heads * head_dim]
  const float* q_bias = nullptr;   // [heads * head_dim] f32, Qwen2 only
  const float* k_bias = nullptr;   // [kv_heads * head_dim]
  const float* v_bias = nullptr;   // [kv_heads * head_dim]
  kernels::WeightView q_norm;      // [head_dim], Qwen3 only (data null otherwise)
  kernels::WeightView k_norm;      // [head_dim]
  kernels::WeightView ffn_norm;    // [hidden]: the feed-forward's input norm
                                   // (post_attention_layernorm; Gemma: pre_feedforward_)
  // Gemma's sandwich norms of the block outputs (data null otherwise): post_attention_ and
  // post_feedforward_layernorm.
  kernels::WeightView attn_out_norm;  // [hidden]
  kernels::WeightView ffn_out_norm;   // [hidden]
  kernels::WeightView gate_proj;      // [intermediate, hidden]
  kernels::WeightView up_proj;        // [intermediate, hidden]
  kernels::WeightView down_proj;      // [hidden, intermediate]
  MoeWeights moe;                     // an MoE layer's router and experts (dense: empty)
};

struct ModelWeights {
  kernels::WeightView embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  kernels::WeightView final_norm;  // [hidden]
  kernels::WeightView lm_head;     // [vocab, hidden]; == embed_tokens when tied
  int64_t bytes = 0;               // total size of the weights as stored
};

}  // namespace trace::engine
