// Model::Load: a Hugging Face model folder, memory-mapped, validated tensor by tensor.
#include <openssl/evp.h>
#include <sys/mman.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/escape.h"
#include "base/files.h"
#include "base/hash.h"
#include "engine/engine.h"
#include "engine/gguf_model.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "kernels/canonical.h"

namespace trace::engine {
namespace {

using json = nlohmann::json;

// A path or name as error messages show it (base/escape.h): paths whole, names clipped.
std::string Shown(const std::string& path) {
  return EscapePathForDisplay(path);
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(Shown(path) + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IOError(Shown(path) + ": read failed");
  return ss.str();
}

std::string HexDigest(const unsigned char* md, unsigned int len) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

class LoadedModel final : public Model {
 public:
  const std::string& dir() const override { return dir_; }
  const ModelConfig& config() const override { return config_; }
  const ModelFingerprint& fingerprint() const override { return fingerprint_; }
  const ModelWeights& weights() const override { return weights_; }

  Status LoadFrom(const std::string& dir, bool hash_weights);

 private:
  Status OpenWeights();
  // Finds `name`, checks its shape, returns its view. `path` of the owning file in errors.
  Result<kernels::WeightView> Tensor(const std::string& name, std::vector<int64_t> shape);
  Result<const float*> Bias(const std::string& name, int64_t n);
  // A norm weight [n]: the stored tensor, or with norm_unit_offset (Gemma) an f32 copy of
  // 1 + each stored value (canonical::UnitOffsetNormWeight).
  Result<kernels::WeightView> NormWeight(const std::string& name, int64_t n);
  // The router and experts of one MoE layer; `prefix` is "model.layers.N.".
  Status LoadMoe(const std::string& prefix, MoeWeights* moe);

  std::string dir_;
  ModelConfig config_;
  ModelFingerprint fingerprint_;
  ModelWeights weights_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;  // in name order
  std::map<std::string, const SafetensorsFile*> owner_;  // tensor name -> file
  std::set<std::string> used_;
  std::vector<std::unique_ptr<std::vector<float>>> f32_copies_;  // biases, Gemma's norms
};

Status LoadedModel::OpenWeights() {
  const std::string index_path = dir_ + "/model.safetensors.index.json";
  const std::string single_path = dir_ + "/model.safetensors";
  std::map<std::string, std::string> index;  // tensor -> shard file name
  std::set<std::string> shard_names;
  TRACE_ASSIGN_OR_RETURN(bool has_index, PathExists(index_path));
  bool has_single = false;
  if (!has_index) {
    TRACE_ASSIGN_OR_RETURN(has_single, PathExists(single_path));
  }
  if (has_index) {
    TRACE_ASSIGN_OR_RETURN(std::string text, ReadFile(index_path));
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object()) {
      return Corruption(Shown(index_path) + ": not a JSON object with a 'weight_map' object");
    }
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) {
        return Corruption(Shown(index_path) + ": weight_map['" + EscapeForDisplay(it.key()) +
                          "'] is not a file name");
      }
      std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos || shard.empty() || shard[0] == '.') {
        return Corruption(Shown(index_path) + ": weight_map['" + EscapeForDisplay(it.key()) +
                          "'] names '" + EscapeForDisplay(shard) +
                          "', not a file in the model folder");
      }
      index[it.key()] = shard;
      shard_names.insert(shard);
    }
  } else if (has_single) {
    shard_names.insert("model.safetensors");
  } else {
    return NotFound(Shown(dir_) + ": no model.safetensors or model.safetensors.index.json");
  }
  for (const std::string& name : shard_names) {  // std::set: name order
    TRACE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(dir_ + "/" + name));
    for (const auto& [tensor, info] : file->tensors()) {
      if (!index.empty()) {
        auto it = index.find(tensor);
        if (it == index.end() || it->second != name) continue;  // the index decides
      }
      if (owner_.count(tensor)) {
        return Corruption(Shown(file->path()) + ": tensor '" + EscapeForDisplay(tensor) +
                          "' also appears in " + Shown(owner_[tensor]->path()));
      }
      owner_[tensor] = file.get();
    }
    files_.push_back(std::move(file));
  }
  for (const auto& [tensor, shard] : index) {
    if (!owner_.count(tensor)) {
      return NotFound(Shown(dir_ + "/" + shard) + ": tensor '" + EscapeForDisplay(tensor) +
                      "' is listed in model.safetensors.index.json but missing from the file");
    }
  }
  return Status::Ok();
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<kernels::WeightView> LoadedModel::Tensor(const std::string& name,
                                                std::vector<int64_t> shape) {
  auto it = owner_.find(name);
  if (it == owner_.end()) {
    std::string where = files_.size() == 1 ? files_[0]->path() : dir_ + " (sharded)";
    return NotFound(Shown(where) + ": tensor '" + EscapeForDisplay(name) + "' is missing");
  }
  const TensorInfo* info = it->second->Find(name);
  if (info->shape != shape) {
    return InvalidArgument(Shown(it->second->path()) + ": tensor '" + EscapeForDisplay(name) +
                           "' has shape " + ShapeString(info->shape) + ", the config needs " +
                           ShapeString(shape));
  }
  used_.insert(name);
  kernels::WeightView v;
  v.data = info->data;
  v.dtype = info->dtype;
  v.rows = shape.size() == 2 ? shape[0] : 1;
  v.cols = shape.back();
  weights_.bytes += static_cast<int64_t>(info->end - info->begin);
  return v;
}

float ToF32(const kernels::WeightView& v, int64_t i) {
  switch (v.dtype) {
    case kernels::DType::kF32:
      return static_cast<const float*>(v.data)[i];
    case kernels::DType::kBF16:
      return kernels::Bf16ToF32(static_cast<const uint16_t*>(v.data)[i]);
    case kernels::DType::kF16:
      return kernels::F16ToF32(static_cast<const uint16_t*>(v.data)[i]);
    case kernels::DType::kQ8_0:  // safetensors holds no ggml block types
    case kernels::DType::kQ4_0:
    case kernels::DType::kQ5_0:
    case kernels::DType::kQ4_1:
    case kernels::DType::kQ5_1:
    case kernels::DType::kQ4_K:
    case kernels::DType::kQ5_K:
    case kernels::DType::kQ6_K:
      break;
  }
  return 0;
}

Result<const float*> LoadedModel::Bias(const std::string& name, int64_t n) {
  TRACE_ASSIGN_OR_RETURN(kernels::WeightView v, Tensor(name, {n}));
  // Biases are tiny; the kernels take them as f32 (an exact conversion).
  auto copy = std::make_unique<std::vector<float>>(n);
  for (int64_t i = 0; i < n; ++i) (*copy)[i] = ToF32(v, i);
  f32_copies_.push_back(std::move(copy));
  return f32_copies_.back()->data();
}

Result<kernels::WeightView> LoadedModel::NormWeight(const std::string& name, int64_t n) {
  TRACE_ASSIGN_OR_RETURN(kernels::WeightView v, Tensor(name, {n}));
  if (!config_.norm_unit_offset) return v;
  auto copy = std::make_unique<std::vector<float>>(n);
  for (int64_t i = 0; i < n; ++i)
    (*copy)[i] = kernels::canonical::UnitOffsetNormWeight(ToF32(v, i));
  v.data = copy->data();
  v.dtype = kernels::DType::kF32;
  f32_copies_.push_back(std::move(copy));
  return v;
}

// Hugging Face names: qwen3_moe `mlp.gate` + `mlp.experts.E.{gate,up,down}_proj`; mixtral
// `block_sparse_moe.gate` + `block_sparse_moe.experts.E.{w1,w3,w2}` (w1 = gate, w3 = up,
// w2 = down); qwen2_moe as qwen3_moe plus `mlp.shared_expert.{gate,up,down}_proj` and
// `mlp.shared_expert_gate` [1, hidden].
Status LoadedModel::LoadMoe(const std::string& prefix, MoeWeights* moe) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, W = c.moe_intermediate_size;
  const bool mixtral = c.architecture == "mixtral";
  const std::string block = prefix + (mixtral ? "block_sparse_moe." : "mlp.");
  TRACE_ASSIGN_OR_RETURN(moe->router, Tensor(block + "gate.weight", {c.num_experts, H}));
  moe->experts.resize(static_cast<size_t>(c.num_experts));
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string x = block + "experts." + std::to_string(e) + ".";
    ExpertWeights& ew = moe->experts[static_cast<size_t>(e)];
    TRACE_ASSIGN_OR_RETURN(ew.gate_proj,
                           Tensor(x + (mixtral ? "w1.weight" : "gate_proj.weight"), {W, H}));
    TRACE_ASSIGN_OR_RETURN(ew.up_proj,
                           Tensor(x + (mixtral ? "w3.weight" : "up_proj.weight"), {W, H}));
    TRACE_ASSIGN_OR_RETURN(ew.down_proj,
                           Tensor(x + (mixtral ? "w2.weight" : "down_proj.weight"), {H, W}));
  }
  const int64_t S = c.shared_expert_intermediate_size;
  if (S > 0) {
    ExpertWeights& se = moe->shared_expert;
    TRACE_ASSIGN_OR_RETURN(se.gate_proj, Tensor(block + "shared_expert.gate_proj.weight", {S, H}));
    TRACE_ASSIGN_OR_RETURN(se.up_proj, Tensor(block + "shared_expert.up_proj.weight", {S, H}));
    TRACE_ASSIGN_OR_RETURN(se.down_proj, Tensor(block + "shared_expert.down_proj.weight", {H, S}));
    TRACE_ASSIGN_OR_RETURN(moe->shared_expert_gate,
                           Tensor(block + "shared_expert_gate.weight", {1, H}));
  }
  return Status::Ok();
}

Status LoadedModel::LoadFrom(const std::string& dir, bool hash_weights) {
  dir_ = dir;
  TRACE_ASSIGN_OR_RETURN(bool is_dir, IsDirectory(dir));
  if (!is_dir) return NotFound(Shown(dir) + ": not a model folder");
  const std::string config_path = dir + "/config.json";
  TRACE_ASSIGN_OR_RETURN(std::string config_text, ReadFile(config_path));
  TRACE_ASSIGN_OR_RETURN(config_, ParseModelConfig(config_text, config_path));
  const std::string gen_path = dir + "/generation_config.json";
  TRACE_ASSIGN_OR_RETURN(bool has_gen, PathExists(gen_path));
  if (has_gen) {
    TRACE_ASSIGN_OR_RETURN(std::string gen_text, ReadFile(gen_path));
    TRACE_RETURN_IF_ERROR(MergeGenerationConfig(gen_text, gen_path, &config_));
  }
  TRACE_RETURN_IF_ERROR(OpenWeights());

  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t QD = c.num_heads * D, KVD = c.num_kv_heads * D;
  // The decoder's tensors are `model.*`, or in a Gemma 3 checkpoint with a vision tower its
  // language model's: `language_model.model.*` (transformers 4.50, as Google published them)
  // or `model.language_model.*` (later transformers); the vision tower's are not read.
  std::string m = "model.";
  if (c.multimodal_wrapper) {
    m = owner_.count("model.language_model.embed_tokens.weight") ? "model.language_model."
                                                                 : "language_model.model.";
  }
  TRACE_ASSIGN_OR_RETURN(weights_.embed_tokens,
                         Tensor(m + "embed_tokens.weight", {c.vocab_size, H}));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = m + "layers." + std::to_string(l) + ".";
    LayerWeights lw;
    TRACE_ASSIGN_OR_RETURN(lw.input_norm, NormWeight(p + "input_layernorm.weight", H));
    TRACE_ASSIGN_OR_RETURN(lw.q_proj, Tensor(p + "self_attn.q_proj.weight", {QD, H}));
    TRACE_ASSIGN_OR_RETURN(lw.k_proj, Tensor(p + "self_attn.k_proj.weight", {KVD, H}));
    TRACE_ASSIGN_OR_RETURN(lw.v_proj, Tensor(p + "self_attn.v_proj.weight", {KVD, H}));
    TRACE_ASSIGN_OR_RETURN(lw.o_proj, Tensor(p + "self_attn.o_proj.weight", {H, QD}));
    if (c.attention_bias) {
      TRACE_ASSIGN_OR_RETURN(lw.q_bias, Bias(p + "self_attn.q_proj.bias", QD));
      TRACE_ASSIGN_OR_RETURN(lw.k_bias, Bias(p + "self_attn.k_proj.bias", KVD));
      TRACE_ASSIGN_OR_RETURN(lw.v_bias, Bias(p + "self_attn.v_proj.bias", KVD));
    }
    if (c.qk_norm) {
      TRACE_ASSIGN_OR_RETURN(lw.q_norm, NormWeight(p + "self_attn.q_norm.weight", D));
      TRACE_ASSIGN_OR_RETURN(lw.k_norm, NormWeight(p + "self_attn.k_norm.weight", D));
    }
    if (c.sandwich_norms) {  // Gemma: four norms a layer
      TRACE_ASSIGN_OR_RETURN(lw.attn_out_norm,
                             NormWeight(p + "post_attention_layernorm.weight", H));
      TRACE_ASSIGN_OR_RETURN(lw.ffn_norm, NormWeight(p + "pre_feedforward_layernorm.weight", H));
      TRACE_ASSIGN_OR_RETURN(lw.ffn_out_norm,
                             NormWeight(p + "post_feedforward_layernorm.weight", H));
    } else {
      TRACE_ASSIGN_OR_RETURN(lw.ffn_norm, NormWeight(p + "post_attention_layernorm.weight", H));
    }
    if (c.IsMoeLayer(l)) {
      TRACE_RETURN_IF_ERROR(LoadMoe(p, &lw.moe));
    } else {
      TRACE_ASSIGN_OR_RETURN(lw.gate_proj, Tensor(p + "mlp.gate_proj.weight", {I, H}));
      TRACE_ASSIGN_OR_RETURN(lw.up_proj, Tensor(p + "mlp.up_proj.weight", {I, H}));
      TRACE_ASSIGN_OR_RETURN(lw.down_proj, Tensor(p + "mlp.down_proj.weight", {H, I}));
    }
    weights_.layers.push_back(lw);
  }
  TRACE_ASSIGN_OR_RETURN(weights_.final_norm, NormWeight(m + "norm.weight", H));
  if (c.tie_word_embeddings) {
    weights_.lm_head = weights_.embed_tokens;
  } else {
    TRACE_ASSIGN_OR_RETURN(weights_.lm_head, Tensor("lm_head.weight", {c.vocab_size, H}));
  }

  fingerprint_.architecture = c.architecture;
  fingerprint_.dtype = TorchDTypeName(c.dtype);
  for (const auto& [name, file] : owner_) {
    if (!used_.count(name)) continue;
    fingerprint_.parameter_count += file->Find(name)->numel();
  }
  fingerprint_.config_sha256 = Sha256Hex(config_text);
  if (hash_weights) {
    // One SHA-256 over the bytes of the safetensors files in name order (== sha256sum of
    // model.safetensors for a single-file model).
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    for (const auto& f : files_) EVP_DigestUpdate(ctx, f->bytes().data(), f->bytes().size());
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    fingerprint_.weights_sha256 = HexDigest(md, len);
    // The hash touched every page: let the kernel drop them until the forward pass needs them.
    for (const auto& f : files_) {
      madvise(const_cast<char*>(f->bytes().data()), f->bytes().size(), MADV_DONTNEED);
    }
  }
  const std::string tok_path = dir + "/tokenizer.json";
  TRACE_ASSIGN_OR_RETURN(bool has_tok, PathExists(tok_path));
  if (has_tok) {
    TRACE_ASSIGN_OR_RETURN(fingerprint_.tokenizer_sha256, Sha256File(tok_path));
  }
  // The chat template: chat_template.jinja if present, else tokenizer_config.json's field.
  const std::string jinja_path = dir + "/chat_template.jinja";
  const std::string tok_config_path = dir + "/tokenizer_config.json";
  TRACE_ASSIGN_OR_RETURN(bool has_jinja, PathExists(jinja_path));
  bool has_tok_config = false;
  if (!has_jinja) {
    TRACE_ASSIGN_OR_RETURN(has_tok_config, PathExists(tok_config_path));
  }
  if (has_jinja) {
    TRACE_ASSIGN_OR_RETURN(std::string tmpl, ReadFile(jinja_path));
    fingerprint_.chat_template_sha256 = Sha256Hex(tmpl);
  } else if (has_tok_config) {
    TRACE_ASSIGN_OR_RETURN(std::string text, ReadFile(tok_config_path));
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return Corruption(Shown(tok_config_path) + ": not a JSON object");
    }
    if (j.contains("chat_template") && j["chat_template"].is_string()) {
      fingerprint_.chat_template_sha256 = Sha256Hex(j["chat_template"].get<std::string>());
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<const Model>> Model::Load(const std::string& dir, bool hash_weights) {
  if (IsGgufFile(dir)) return LoadGgufModel(dir, hash_weights);
  auto model = std::make_shared<LoadedModel>();
  TRACE_RETURN_IF_ERROR(model->LoadFrom(dir, hash_weights));
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace trace::engine
