// A Hugging Face folder -> GGUF converter for the tests, written from llama.cpp's
// convert_hf_to_gguf.py and gguf-py's names (LLM_KV keys, MODEL_TENSOR names, the q/k row
// permutation of `llama`, Llama 3's rope_freqs, the vocabulary with its token types) and
// written by testkit/gguf_writer.h; it shares no code with engine/gguf_model.cc.
// Ownership: values. Thread safety: none needed. Errors: gtest failures.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model_init.h"
#include "engine/safetensors.h"
#include "engine_test_util.h"
#include "testkit/gguf_writer.h"
#include "testkit/kquant_reference.h"

namespace trace::engine::testing {

using json = nlohmann::json;
using testkit::GgufWriter;

inline constexpr uint32_t kGgmlF32 = 0, kGgmlBF16 = 30, kGgmlQ8_0 = 8, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3,
                          kGgmlQ5_0 = 6, kGgmlQ5_1 = 7, kGgmlQ2_K = 10, kGgmlQ4_K = 12,
                          kGgmlQ5_K = 13, kGgmlQ6_K = 14;

enum class MatrixType {
  kF32,
  kBF16,
  kQ8_0,
  kQ8_0Dequantized,
  kQ4_0,
  kQ4_0Dequantized,
  kKQuants,             // a Q4_K_M-like mix: KQuantOf (Q8_0 where a row is not whole blocks)
  kKQuantsDequantized,  // the F32 values of those blocks (testkit/kquant_reference.h)
  kQ5_0,
  kQ5_0Dequantized,
  kQ4_1,
  kQ4_1Dequantized,
  kQ5_1,
  kQ5_1Dequantized,
};

// The K-quant of a matrix in the kKQuants mix, after llama-quantize's Q4_K_M (Q6_K for the
// value projection and the output, Q4_K for the rest) with Q5_K for the down projection so that
// all three types appear.
inline testkit::KQuant KQuantOf(const std::string& gguf_name) {
  if (gguf_name.find("attn_v") != std::string::npos || gguf_name == "output.weight") {
    return testkit::KQuant::kQ6_K;
  }
  if (gguf_name.find("ffn_down") != std::string::npos) return testkit::KQuant::kQ5_K;
  return testkit::KQuant::kQ4_K;
}

// The tiny preset widened so that every matrix is whole K-quant super-blocks (256 columns):
// hidden 256, MLP 512, 4 heads (2 kv) of 64.
inline ModelConfig KQuantTinyConfig() {
  auto config = PresetConfig("tiny");
  EXPECT_TRUE(config.ok());
  config->hidden_size = 256;
  config->intermediate_size = 512;
  config->num_heads = 4;
  config->num_kv_heads = 2;
  config->head_dim = 64;
  return *config;
}

struct ConvertOptions {
  // Matrices as F32 (widened), BF16 (their stored bytes), Q8_0 or Q4_0 (llama.cpp's
  // quantize_row_q8_0_ref / quantize_row_q4_0_ref), or the F32 values those blocks stand for.
  MatrixType matrices = MatrixType::kF32;
  std::string pre;           // tokenizer.ggml.pre
  bool llama3_rope = false;  // write rope_freqs as the converter does for Llama 3
};

// ggml's quantize_row_q4_0_ref, from its description: per block of 32, the value of largest
// magnitude `max`, d = max / -8, q = min(15, (int8)(x / d + 8.5)), low nibbles the first 16
// elements and high nibbles the next 16; the value is d * (q - 8). `dequantized`: those f32
// values instead of the blocks.
inline std::string QuantizeQ4_0(const std::vector<float>& x, bool dequantized) {
  std::string out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0, max = 0;
    for (size_t j = 0; j < 32; ++j) {
      if (amax < std::fabs(x[b + j])) {
        amax = std::fabs(x[b + j]);
        max = x[b + j];
      }
    }
    const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t d16 = kernels::F32ToF16RoundNearestEven(d);
    uint8_t q[32];
    for (size_t j = 0; j < 32; ++j) {
      const int v = static_cast<int8_t>(x[b + j] * id + 8.5f);
      q[j] = static_cast<uint8_t>(std::min(15, v));
    }
    if (dequantized) {
      for (size_t j = 0; j < 32; ++j) {
        const float v = kernels::F16ToF32(d16) * static_cast<float>(static_cast<int>(q[j]) - 8);
        out += std::string(reinterpret_cast<const char*>(&v), 4);
      }
    } else {
      out += std::string(reinterpret_cast<const char*>(&d16), 2);
      for (size_t j = 0; j < 16; ++j) out += static_cast<char>(q[j] | (q[j + 16] << 4));
    }
  }
  return out;
}

// ggml's quantize_row_q8_0_ref, from its description: per block of 32, d = max|x| / 127,
// q = roundf(x / d) (with the f32 d; stored as f16). `dequantized`: the f32 values the blocks
// stand for (f16(d) * q) instead of the blocks.
inline std::string QuantizeQ8_0(const std::vector<float>& x, bool dequantized) {
  std::string out;
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t d16 = kernels::F32ToF16RoundNearestEven(d);
    if (!dequantized) out += std::string(reinterpret_cast<const char*>(&d16), 2);
    for (size_t j = 0; j < 32; ++j) {
      const int8_t q = static_cast<int8_t>(std::round(x[b + j] * id));
      if (dequantized) {
        const float v = kernels::F16ToF32(d16) * static_cast<float>(q);
        out += std::string(reinterpret_cast<const char*>(&v), 4);
      } else {
        out += static_cast<char>(q);
      }
    }
  }
  return out;
}

// ggml's quantize_row_q5_0_ref, q4_1_ref and q5_1_ref, from their description, per block of 32:
//   Q5_0: max = the value of largest magnitude, d = max / -16, q = min(31, (int8)(x / d + 16.5)),
//         value d * (q - 16);
//   Q4_1 / Q5_1: d = (max - min) / 15 (31), m = min, q = (x - min) / d + 0.5 truncated (Q4_1
//         clamped to 15), value d * q + m;
// stored as f16 d, (f16 m), (4 bytes qh: bit j = bit 4 of element j), 16 bytes of nibbles (the
// low nibble of byte j element j, the high one element j + 16). `dequantized`: the f32 values
// (computed in double, rounded once) instead of the blocks.
inline std::string QuantizeBlock32(MatrixType type, const std::vector<float>& x, bool dequantized) {
  const bool affine = type == MatrixType::kQ4_1 || type == MatrixType::kQ5_1;
  const bool fifth = type == MatrixType::kQ5_0 || type == MatrixType::kQ5_1;
  std::string out;
  auto append = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  for (size_t b = 0; b < x.size(); b += 32) {
    float d = 0, min = 0;
    if (affine) {
      float lo = x[b], hi = x[b];
      for (size_t j = 0; j < 32; ++j) lo = std::min(lo, x[b + j]), hi = std::max(hi, x[b + j]);
      d = (hi - lo) / (fifth ? 31.0f : 15.0f);
      min = lo;
    } else {
      float amax = 0, max = 0;
      for (size_t j = 0; j < 32; ++j) {
        if (amax < std::fabs(x[b + j])) amax = std::fabs(x[b + j]), max = x[b + j];
      }
      d = max / -16.0f;
    }
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t d16 = kernels::F32ToF16RoundNearestEven(d);
    const uint16_t m16 = kernels::F32ToF16RoundNearestEven(min);
    int q[32];
    uint32_t qh = 0;
    for (size_t j = 0; j < 32; ++j) {
      if (affine) {
        q[j] = static_cast<uint8_t>((x[b + j] - min) * id + 0.5f);
        if (!fifth) q[j] = std::min(15, q[j]);
      } else {
        q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[b + j] * id + 16.5f)));
      }
      qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    }
    if (dequantized) {
      const double dd = kernels::F16ToF32(d16), mm = kernels::F16ToF32(m16);
      for (size_t j = 0; j < 32; ++j) {
        const float v = static_cast<float>(affine ? dd * q[j] + mm : dd * (q[j] - 16));
        append(&v, 4);
      }
      continue;
    }
    append(&d16, 2);
    if (affine) append(&m16, 2);
    if (fifth) append(&qh, 4);
    for (size_t j = 0; j < 16; ++j)
      out += static_cast<char>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
  }
  return out;
}

inline std::string F32Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// A tensor's values as f32 (the presets store bf16).
inline std::vector<float> Values(const TensorInfo& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const auto* src = static_cast<const uint16_t*>(t.data);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

// convert_hf_to_gguf.py's LlamaModel.permute: rows (head, half, i) -> (head, i, half).
inline std::string PermuteRows(const std::string& bytes, int64_t rows, int64_t heads,
                               size_t row_bytes) {
  std::string out(bytes.size(), '\0');
  const int64_t D = rows / heads, half = D / 2;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t a = 0; a < 2; ++a) {
      for (int64_t i = 0; i < half; ++i) {
        std::memcpy(out.data() + (h * D + 2 * i + a) * row_bytes,
                    bytes.data() + (h * D + a * half + i) * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

// The vocabulary as convert_hf_to_gguf.py's get_vocab_base writes it: every id below
// vocab_size; added tokens CONTROL (3) when special or shaped like <|...|>, else USER_DEFINED
// (4); ids without a token "[PAD<id>]" UNUSED (5); the rest NORMAL (1).
inline void WriteVocab(GgufWriter* w, const std::string& dir, int64_t vocab_size,
                       const std::string& pre) {
  const json tok = json::parse(testing::ReadAll(dir + "/tokenizer.json"));
  std::map<int64_t, std::string> by_id;
  for (auto it = tok["model"]["vocab"].begin(); it != tok["model"]["vocab"].end(); ++it) {
    by_id[it.value().get<int64_t>()] = it.key();
  }
  std::map<int64_t, bool> added_special;
  for (const json& a : tok["added_tokens"]) {
    by_id[a["id"].get<int64_t>()] = a["content"].get<std::string>();
    added_special[a["id"].get<int64_t>()] = a["special"].get<bool>();
  }
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int64_t id = 0; id < vocab_size; ++id) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      tokens.push_back("[PAD" + std::to_string(id) + "]");
      types.push_back(5);
      continue;
    }
    tokens.push_back(it->second);
    auto added = added_special.find(id);
    const bool looks_special = it->second.rfind("<|", 0) == 0 && it->second.size() >= 4 &&
                               it->second.substr(it->second.size() - 2) == "|>";
    types.push_back(added == added_special.end() ? 1 : (added->second || looks_special) ? 3 : 4);
  }
  std::vector<std::string> merges;
  for (const json& m : tok["model"]["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  w->String("tokenizer.ggml.model", "gpt2");
  w->String("tokenizer.ggml.pre", pre);
  w->StringArray("tokenizer.ggml.tokens", tokens);
  w->NumberArray<int32_t>("tokenizer.ggml.token_type", GgufWriter::kI32, types);
  w->StringArray("tokenizer.ggml.merges", merges);
  const json tc = json::parse(testing::ReadAll(dir + "/tokenizer_config.json"));
  if (tc.contains("chat_template") && tc["chat_template"].is_string()) {
    w->String("tokenizer.chat_template", tc["chat_template"].get<std::string>());
  }
}

// Converts the model folder `dir` to `out` as convert_hf_to_gguf.py would.
// The Q5_0 / Q4_1 / Q5_1 matrix types: which quantizer, and its ggml type id.
struct Block32Type {
  MatrixType matrices, type;
  bool dequantized;
  uint32_t ggml;
};
inline const Block32Type* Block32Of(MatrixType m) {
  static constexpr Block32Type kTypes[] = {
      {MatrixType::kQ5_0, MatrixType::kQ5_0, false, kGgmlQ5_0},
      {MatrixType::kQ5_0Dequantized, MatrixType::kQ5_0, true, kGgmlQ5_0},
      {MatrixType::kQ4_1, MatrixType::kQ4_1, false, kGgmlQ4_1},
      {MatrixType::kQ4_1Dequantized, MatrixType::kQ4_1, true, kGgmlQ4_1},
      {MatrixType::kQ5_1, MatrixType::kQ5_1, false, kGgmlQ5_1},
      {MatrixType::kQ5_1Dequantized, MatrixType::kQ5_1, true, kGgmlQ5_1}};
  for (const Block32Type& t : kTypes) {
    if (t.matrices == m) return &t;
  }
  return nullptr;
}

inline void ConvertToGguf(const std::string& dir, const std::string& out, const ConvertOptions& o) {
  const json c = json::parse(testing::ReadAll(dir + "/config.json"));
  const std::string type = c["model_type"];
  const std::string arch = type == "mistral" ? "llama" : type;  // Mistral is written as llama
  GgufWriter w;
  w.String("general.architecture", arch);
  w.String("general.name", "test");
  const int64_t heads = c["num_attention_heads"], kv = c["num_key_value_heads"];
  const int64_t head_dim = c["head_dim"];
  w.U32(arch + ".context_length", c["max_position_embeddings"].get<uint32_t>());
  w.U32(arch + ".embedding_length", c["hidden_size"].get<uint32_t>());
  w.U32(arch + ".block_count", c["num_hidden_layers"].get<uint32_t>());
  w.U32(arch + ".feed_forward_length", c["intermediate_size"].get<uint32_t>());
  w.U32(arch + ".attention.head_count", static_cast<uint32_t>(heads));
  w.U32(arch + ".attention.head_count_kv", static_cast<uint32_t>(kv));
  w.U32(arch + ".attention.key_length", static_cast<uint32_t>(head_dim));
  w.U32(arch + ".attention.value_length", static_cast<uint32_t>(head_dim));
  w.U32(arch + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.F32(arch + ".rope.freq_base", c["rope_theta"].get<float>());
  w.F32(arch + ".attention.layer_norm_rms_epsilon", c["rms_norm_eps"].get<float>());
  std::vector<int64_t> eos;
  if (c["eos_token_id"].is_array()) {
    eos = c["eos_token_id"].get<std::vector<int64_t>>();
  } else {
    eos.push_back(c["eos_token_id"].get<int64_t>());
  }
  w.U32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos[0]));
  WriteVocab(&w, dir, c["vocab_size"], o.pre);

  auto file = SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto add = [&](const std::string& gguf_name, const std::string& hf_name, bool matrix,
                 int64_t permute_heads = 0) {
    const TensorInfo* t = (*file)->Find(hf_name);
    ASSERT_NE(t, nullptr) << hf_name;
    std::vector<uint64_t> dims(t->shape.rbegin(), t->shape.rend());
    std::string bytes;
    uint32_t ggml = kGgmlF32;
    if (matrix && o.matrices == MatrixType::kBF16) {
      bytes.assign(static_cast<const char*>(t->data), static_cast<size_t>(t->numel()) * 2);
      ggml = kGgmlBF16;
    } else if (const auto* block32 = Block32Of(o.matrices); matrix && block32 != nullptr) {
      bytes = QuantizeBlock32(block32->type, Values(*t), block32->dequantized);
      ggml = block32->dequantized ? kGgmlF32 : block32->ggml;
    } else if (matrix &&
               (o.matrices == MatrixType::kQ8_0 || o.matrices == MatrixType::kQ8_0Dequantized)) {
      const bool dequantized = o.matrices == MatrixType::kQ8_0Dequantized;
      bytes = QuantizeQ8_0(Values(*t), dequantized);
      ggml = dequantized ? kGgmlF32 : kGgmlQ8_0;
    } else if (matrix && (o.matrices == MatrixType::kKQuants ||
                          o.matrices == MatrixType::kKQuantsDequantized)) {
      const bool dequantized = o.matrices == MatrixType::kKQuantsDequantized;
      if (t->shape.back() % 256 == 0) {
        const testkit::KQuant type = KQuantOf(gguf_name);
        bytes = testkit::QuantizeKQuant(type, Values(*t));
        if (dequantized) bytes = F32Bytes(testkit::DequantizeKQuant(type, bytes));
        ggml = dequantized                      ? kGgmlF32
               : type == testkit::KQuant::kQ4_K ? kGgmlQ4_K
               : type == testkit::KQuant::kQ5_K ? kGgmlQ5_K
                                                : kGgmlQ6_K;
      } else {
        bytes = QuantizeQ8_0(Values(*t), dequantized);
        ggml = dequantized ? kGgmlF32 : kGgmlQ8_0;
      }
    } else if (matrix &&
               (o.matrices == MatrixType::kQ4_0 || o.matrices == MatrixType::kQ4_0Dequantized)) {
      const bool dequantized = o.matrices == MatrixType::kQ4_0Dequantized;
      bytes = QuantizeQ4_0(Values(*t), dequantized);
      ggml = dequantized ? kGgmlF32 : kGgmlQ4_0;
    } else {
      bytes = F32Bytes(Values(*t));  // norms and biases are always F32
    }
    if (permute_heads > 0) {
      bytes = PermuteRows(bytes, t->shape[0], permute_heads,
                          bytes.size() / static_cast<size_t>(t->shape[0]));
    }
    w.Tensor(gguf_name, dims, ggml, bytes);
  };
  const bool llama = arch == "llama";
  add("token_embd.weight", "model.embed_tokens.weight", true);
  for (int64_t l = 0; l < c["num_hidden_layers"].get<int64_t>(); ++l) {
    const std::string b = "blk." + std::to_string(l) + ".",
                      p = "model.layers." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", p + "input_layernorm.weight", false);
    add(b + "attn_q.weight", p + "self_attn.q_proj.weight", true, llama ? heads : 0);
    add(b + "attn_k.weight", p + "self_attn.k_proj.weight", true, llama ? kv : 0);
    add(b + "attn_v.weight", p + "self_attn.v_proj.weight", true);
    add(b + "attn_output.weight", p + "self_attn.o_proj.weight", true);
    if (type == "qwen2") {
      add(b + "attn_q.bias", p + "self_attn.q_proj.bias", false);
      add(b + "attn_k.bias", p + "self_attn.k_proj.bias", false);
      add(b + "attn_v.bias", p + "self_attn.v_proj.bias", false);
    }
    if (type == "qwen3") {
      add(b + "attn_q_norm.weight", p + "self_attn.q_norm.weight", false);
      add(b + "attn_k_norm.weight", p + "self_attn.k_norm.weight", false);
    }
    add(b + "ffn_norm.weight", p + "post_attention_layernorm.weight", false);
    add(b + "ffn_gate.weight", p + "mlp.gate_proj.weight", true);
    add(b + "ffn_up.weight", p + "mlp.up_proj.weight", true);
    add(b + "ffn_down.weight", p + "mlp.down_proj.weight", true);
  }
  add("output_norm.weight", "model.norm.weight", false);
  if (!c.value("tie_word_embeddings", false)) add("output.weight", "lm_head.weight", true);
  if (o.llama3_rope) {
    // LlamaModel.generate_extra_tensors, in float32 as torch computes freqs there.
    const json& rs = c["rope_scaling"];
    const double factor = rs["factor"], low = rs["low_freq_factor"], high = rs["high_freq_factor"];
    const double old_len = rs["original_max_position_embeddings"];
    std::vector<float> factors;
    for (int64_t i = 0; i < head_dim; i += 2) {
      const float freq = 1.0f / std::pow(c["rope_theta"].get<float>(),
                                         static_cast<float>(i) / static_cast<float>(head_dim));
      const double wavelen = 2 * M_PI / freq;
      if (wavelen < old_len / high) {
        factors.push_back(1.0f);
      } else if (wavelen > old_len / low) {
        factors.push_back(static_cast<float>(factor));
      } else {
        const double smooth = (old_len / wavelen - low) / (high - low);
        factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
      }
    }
    w.Tensor("rope_freqs.weight", {static_cast<uint64_t>(head_dim / 2)}, kGgmlF32,
             F32Bytes(factors));
  }
  testing::WriteAll(out, w.Finish());
}

// A one-layer `arch` file whose token embedding is Q2_K: a quantization the loader refuses.
inline std::string Q2KFile(const std::string& arch) {
  GgufWriter w;
  w.String("general.architecture", arch);
  for (const auto& [k, v] : {std::pair<const char*, uint32_t>{".embedding_length", 256},
                             {".attention.head_count", 4},
                             {".feed_forward_length", 128},
                             {".block_count", 1},
                             {".context_length", 256}}) {
    w.U32(arch + k, v);
  }
  w.F32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.Tensor("token_embd.weight", {256, 8}, kGgmlQ2_K, std::string(8 * 84, '\0'));
  return w.Finish();
}

}  // namespace trace::engine::testing
