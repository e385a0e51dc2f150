// An independent float64 forward pass over a loaded model's tensors, written from the
// Hugging Face modelling code (Qwen2/Qwen3/Llama/Mistral, Qwen3-MoE/Qwen2-MoE/Mixtral,
// Gemma 3), for the accuracy tests. It shares no code with the engine or the kernels: its own
// bf16/f16 decoding, RoPE (with Llama 3's and linear scaling), softmax, sliding windows, GeLU
// and soft-capping. Gemma's norm weights are read as stored (from model.safetensors, by their
// Hugging Face names) and offset by 1 here, not taken from the engine's f32 copies.
// Ownership: reads the model's mapped tensors. Thread safety: none needed. Errors: none.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/safetensors.h"

namespace trace::engine::testing {

inline double RefWeight(const kernels::WeightView& w, int64_t i) {
  if (w.dtype == kernels::DType::kF32) return static_cast<const float*>(w.data)[i];
  uint16_t h = static_cast<const uint16_t*>(w.data)[i];
  if (w.dtype == kernels::DType::kBF16) {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  int sign = (h >> 15) & 1, exp = (h >> 10) & 31, frac = h & 1023;
  double v = exp == 0 ? std::ldexp(frac, -24) : std::ldexp(1024 + frac, exp - 25);
  return sign ? -v : v;
}

class ReferenceForward {
 public:
  explicit ReferenceForward(const Model& model) : m_(model), c_(model.config()) {
    k_.resize(c_.num_layers);
    v_.resize(c_.num_layers);
    if (c_.norm_unit_offset) {
      auto file = SafetensorsFile::Open(model.dir() + "/model.safetensors");
      if (file.ok()) raw_ = std::move(*file);
    }
  }

  // The experts each MoE layer chose, ascending, for every Step so far (layer, ids).
  const std::vector<std::pair<int, std::vector<int>>>& routes() const { return routes_; }

  // Appends one token; returns the logits at its position.
  std::vector<double> Step(int32_t token) {
    const auto& w = m_.weights();
    const int64_t H = c_.hidden_size, D = c_.head_dim, nh = c_.num_heads, nkv = c_.num_kv_heads;
    const int64_t pos = length_++;
    std::vector<double> x(H);
    const double embed_scale = c_.norm_unit_offset ? GemmaEmbedScale() : 1.0;
    for (int64_t i = 0; i < H; ++i) x[i] = RefWeight(w.embed_tokens, token * H + i) * embed_scale;
    for (int64_t l = 0; l < c_.num_layers; ++l) {
      const LayerWeights& lw = w.layers[l];
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const bool local = c_.IsSlidingLayer(l);
      std::vector<double> h = Norm(x, lw.input_norm, p + "input_layernorm.weight");
      std::vector<double> q = Linear(lw.q_proj, h, lw.q_bias);
      std::vector<double> k = Linear(lw.k_proj, h, lw.k_bias);
      std::vector<double> v = Linear(lw.v_proj, h, lw.v_bias);
      for (int64_t hd = 0; hd < nh; ++hd) {
        if (c_.qk_norm) NormInPlace(&q[hd * D], D, lw.q_norm, p + "self_attn.q_norm.weight");
        Rotate(&q[hd * D], pos, local);
      }
      for (int64_t hd = 0; hd < nkv; ++hd) {
        if (c_.qk_norm) NormInPlace(&k[hd * D], D, lw.k_norm, p + "self_attn.k_norm.weight");
        Rotate(&k[hd * D], pos, local);
      }
      k_[l].insert(k_[l].end(), k.begin(), k.end());
      v_[l].insert(v_[l].end(), v.begin(), v.end());
      std::vector<double> attn(nh * D, 0.0);
      for (int64_t hd = 0; hd < nh; ++hd) {
        const int64_t g = hd / (nh / nkv);
        // transformers' sliding mask: key j is visible iff j > pos - window.
        const int64_t first =
            local && c_.sliding_window > 0 ? std::max<int64_t>(0, pos - c_.sliding_window + 1) : 0;
        // Gemma: query_pre_attn_scalar ** -0.5; the others head_dim ** -0.5.
        const double scaling =
            1.0 / std::sqrt(static_cast<double>(c_.norm_unit_offset ? c_.attention_scale_dim : D));
        std::vector<double> s(pos + 1, 0.0);
        double mx = -INFINITY;
        for (int64_t j = first; j <= pos; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[hd * D + d] * k_[l][(j * nkv + g) * D + d];
          s[j] = dot * scaling;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = first; j <= pos; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = first; j <= pos; ++j) {
          for (int64_t d = 0; d < D; ++d) {
            attn[hd * D + d] += s[j] / sum * v_[l][(j * nkv + g) * D + d];
          }
        }
      }
      std::vector<double> o = Linear(lw.o_proj, attn, nullptr);
      if (c_.sandwich_norms) o = Norm(o, lw.attn_out_norm, p + "post_attention_layernorm.weight");
      for (int64_t i = 0; i < H; ++i) x[i] += o[i];
      h = c_.sandwich_norms ? Norm(x, lw.ffn_norm, p + "pre_feedforward_layernorm.weight")
                            : Norm(x, lw.ffn_norm, p + "post_attention_layernorm.weight");
      std::vector<double> down = lw.moe.experts.empty()
                                     ? SwiGlu(lw.gate_proj, lw.up_proj, lw.down_proj, h)
                                     : Mixture(lw.moe, h, static_cast<int>(l));
      if (c_.sandwich_norms) {
        down = Norm(down, lw.ffn_out_norm, p + "post_feedforward_layernorm.weight");
      }
      for (int64_t i = 0; i < H; ++i) x[i] += down[i];
    }
    std::vector<double> logits =
        Linear(w.lm_head, Norm(x, w.final_norm, "model.norm.weight"), nullptr);
    if (c_.final_logit_softcap > 0) {  // Gemma: cap * tanh(logits / cap)
      const double cap = c_.final_logit_softcap;
      for (double& v : logits) v = cap * std::tanh(v / cap);
    }
    return logits;
  }

 private:
  std::vector<double> Linear(const kernels::WeightView& w, const std::vector<double>& x,
                             const float* bias) const {
    std::vector<double> y(w.rows);
    for (int64_t n = 0; n < w.rows; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k) acc += RefWeight(w, n * w.cols + k) * x[k];
      y[n] = acc + (bias ? bias[n] : 0.0);
    }
    return y;
  }
  std::vector<double> SwiGlu(const kernels::WeightView& gate_proj,
                             const kernels::WeightView& up_proj,
                             const kernels::WeightView& down_proj,
                             const std::vector<double>& h) const {
    std::vector<double> gate = Linear(gate_proj, h, nullptr);
    std::vector<double> up = Linear(up_proj, h, nullptr);
    const bool gelu = c_.hidden_activation == ModelConfig::Activation::kGeluTanh;
    for (size_t i = 0; i < gate.size(); ++i) {
      const double g = gate[i];
      // gelu_pytorch_tanh: 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))); else silu.
      const double act = gelu ? 0.5 * g *
                                    (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) *
                                                     (g + 0.044715 * g * g * g)))
                              : g / (1 + std::exp(-g));
      gate[i] = act * up[i];
    }
    return Linear(down_proj, gate, nullptr);
  }
  // The Hugging Face Qwen3-MoE / Qwen2-MoE / Mixtral sparse block: softmax over the router
  // logits, top-k (ties: lower id first), optional renormalisation, the weighted sum of the
  // experts, and Qwen2-MoE's gated shared expert.
  std::vector<double> Mixture(const MoeWeights& moe, const std::vector<double>& h, int layer) {
    std::vector<double> logits = Linear(moe.router, h, nullptr);
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double& v : logits) sum += (v = std::exp(v - mx));
    for (double& v : logits) v /= sum;
    std::vector<int> order(logits.size());
    for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int>(e);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return logits[a] > logits[b]; });
    order.resize(static_cast<size_t>(c_.num_experts_per_tok));
    double chosen = 0;
    for (int e : order) chosen += logits[e];
    std::vector<double> out(h.size(), 0.0);
    std::vector<int> route;
    for (int e : order) {
      const ExpertWeights& ew = moe.experts[static_cast<size_t>(e)];
      std::vector<double> y = SwiGlu(ew.gate_proj, ew.up_proj, ew.down_proj, h);
      const double w = c_.norm_topk_prob ? logits[e] / chosen : logits[e];
      for (size_t i = 0; i < out.size(); ++i) out[i] += w * y[i];
      route.push_back(e);
    }
    std::sort(route.begin(), route.end());
    routes_.push_back({layer, route});
    if (moe.has_shared_expert()) {
      // Qwen2-MoE: + sigmoid(shared_expert_gate(h)) * shared_expert(h).
      const ExpertWeights& se = moe.shared_expert;
      std::vector<double> y = SwiGlu(se.gate_proj, se.up_proj, se.down_proj, h);
      const double gate = 1.0 / (1.0 + std::exp(-Linear(moe.shared_expert_gate, h, nullptr)[0]));
      for (size_t i = 0; i < out.size(); ++i) out[i] += gate * y[i];
    }
    return out;
  }
  // RMSNorm with the engine's weight view, or for Gemma with 1 + the stored tensor `name`.
  std::vector<double> Norm(std::vector<double> x, const kernels::WeightView& w,
                           const std::string& name) const {
    NormInPlace(x.data(), static_cast<int64_t>(x.size()), w, name);
    return x;
  }
  void NormInPlace(double* x, int64_t n, const kernels::WeightView& w,
                   const std::string& name) const {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
    double inv = 1.0 / std::sqrt(ss / n + static_cast<double>(c_.rms_norm_eps));
    kernels::WeightView stored = w;
    double offset = 0.0;
    if (c_.norm_unit_offset) {  // Gemma3RMSNorm: x * inv * (1 + weight)
      const TensorInfo* info = raw_ ? raw_->Find(name) : nullptr;
      if (info == nullptr) {
        ADD_FAILURE() << "reference: no stored norm tensor " << name;
        return;
      }
      stored.data = info->data;
      stored.dtype = info->dtype;
      offset = 1.0;
    }
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * (offset + RefWeight(stored, i));
  }
  // transformers' Gemma3TextScaledWordEmbedding: torch.tensor(hidden ** 0.5) (float32) cast to
  // the weights' dtype (bf16 here: round to nearest even on the top 16 bits).
  double GemmaEmbedScale() const {
    float f = static_cast<float>(std::sqrt(static_cast<double>(c_.hidden_size)));
    if (c_.dtype != kernels::DType::kBF16) return f;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // The inverse frequency of pair i: theta^(-2i/D), scaled as transformers'
  // _compute_llama3_parameters / _compute_linear_scaling_rope_parameters do (global layers;
  // Gemma 3's local layers use rope_local_base_freq unscaled).
  double InverseFrequency(int64_t i, bool local) const {
    const int64_t D = c_.head_dim;
    if (local && c_.rope_local_theta > 0) return std::pow(c_.rope_local_theta, -2.0 * i / D);
    const double f = std::pow(c_.rope_theta, -2.0 * i / D);
    const kernels::RopeScaling& rs = c_.rope_scaling;
    if (rs.type == kernels::RopeScaling::Type::kLinear) return f / rs.factor;
    if (rs.type != kernels::RopeScaling::Type::kLlama3) return f;
    const double wavelen = 2 * 3.14159265358979323846 / f;
    const double low_wavelen = rs.original_max_position_embeddings / rs.low_freq_factor;
    const double high_wavelen = rs.original_max_position_embeddings / rs.high_freq_factor;
    if (wavelen > low_wavelen) return f / rs.factor;
    if (wavelen < high_wavelen) return f;
    const double smooth = (rs.original_max_position_embeddings / wavelen - rs.low_freq_factor) /
                          (rs.high_freq_factor - rs.low_freq_factor);
    return (1 - smooth) * f / rs.factor + smooth * f;
  }
  void Rotate(double* x, int64_t pos, bool local) const {
    const int64_t D = c_.head_dim, half = D / 2;
    for (int64_t i = 0; i < half; ++i) {
      double inv_freq = InverseFrequency(i, local);
      double a = pos * inv_freq, cs = std::cos(a), sn = std::sin(a);
      double x1 = x[i], x2 = x[i + half];
      x[i] = x1 * cs - x2 * sn;
      x[i + half] = x2 * cs + x1 * sn;
    }
  }

  const Model& m_;
  const ModelConfig& c_;
  int64_t length_ = 0;
  std::vector<std::vector<double>> k_, v_;
  std::vector<std::pair<int, std::vector<int>>> routes_;
  std::unique_ptr<SafetensorsFile> raw_;  // Gemma: the stored norm weights
};

// ||a - b|| / ||b||.
inline double RelativeL2(std::span<const float> a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace trace::engine::testing
