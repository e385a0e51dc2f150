#include "engine/model_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/escape.h"
#include "base/float_text.h"

namespace trace::engine {
namespace {

using json = nlohmann::json;

// Sizes past these are no model's (the largest today are ~2^18 vocab, 2^14 hidden, 2^7
// layers, 2^24 positions); bounding them keeps every product the engine forms (weights,
// KV cache, RoPE tables) far inside int64, so a hostile config.json is an error here and
// not an overflow or a failed allocation later.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden, intermediate, head_dim
constexpr int64_t kMaxCount = int64_t{1} << 12;  // layers, heads
constexpr int64_t kMaxPositions = int64_t{1} << 26;

// An integer field in [0, limit].
Result<int64_t> GetInt(const json& j, const std::string& key, const std::string& path,
                       int64_t limit, std::optional<int64_t> fallback = std::nullopt) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    return InvalidArgument(path + ": field '" + key + "' is missing");
  }
  if (!it->is_number_integer())
    return InvalidArgument(path + ": field '" + key + "' is not an integer");
  if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(limit)
                               : it->get<int64_t>() > limit) {
    return InvalidArgument(path + ": field '" + key + "' is " + it->dump() +
                           ", implausibly large (at most " + std::to_string(limit) + ")");
  }
  int64_t v = it->get<int64_t>();
  if (v < 0) return InvalidArgument(path + ": field '" + key + "' is negative");
  return v;
}

Result<double> GetNumber(const json& j, const std::string& key, const std::string& path,
                         double fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) return InvalidArgument(path + ": field '" + key + "' is not a number");
  return it->get<double>();
}

Result<bool> GetBool(const json& j, const std::string& key, const std::string& path,
                     bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return InvalidArgument(path + ": field '" + key + "' is not a boolean");
  return it->get<bool>();
}

Status AddEosIds(const json& j, const std::string& path, std::vector<int32_t>* ids) {
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return Status::Ok();
  std::vector<json> values;
  if (it->is_array()) {
    values.assign(it->begin(), it->end());
  } else {
    values.push_back(*it);
  }
  for (const json& v : values) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      return InvalidArgument(path + ": field 'eos_token_id' must be a token id or a list of them");
    }
    int32_t id = static_cast<int32_t>(v.get<int64_t>());
    if (std::find(ids->begin(), ids->end(), id) == ids->end()) ids->push_back(id);
  }
  return Status::Ok();
}

// The mixture-of-experts fields of qwen3_moe, qwen2_moe and mixtral (Hugging Face names and
// defaults; Qwen2MoeConfig's: 60 experts, top 4, unnormalised, step 1, shared expert 5632).
Status ParseMoe(const json& j, const std::string& path, ModelConfig* c) {
  if (c->architecture == "mixtral") {
    // Mixtral: every layer is sparse, experts as wide as intermediate_size, and the top-k
    // probabilities always renormalised (softmax over the k chosen logits).
    TRACE_ASSIGN_OR_RETURN(c->num_experts,
                           GetInt(j, "num_local_experts", path, kMaxCount, int64_t{8}));
    TRACE_ASSIGN_OR_RETURN(c->num_experts_per_tok,
                           GetInt(j, "num_experts_per_tok", path, kMaxCount, int64_t{2}));
    c->moe_intermediate_size = c->intermediate_size;
    c->norm_topk_prob = true;
  } else if (c->architecture == "qwen3_moe" || c->architecture == "qwen2_moe") {
    const bool qwen2 = c->architecture == "qwen2_moe";
    TRACE_ASSIGN_OR_RETURN(c->num_experts,
                           qwen2 ? GetInt(j, "num_experts", path, kMaxCount, int64_t{60})
                                 : GetInt(j, "num_experts", path, kMaxCount));
    TRACE_ASSIGN_OR_RETURN(c->num_experts_per_tok,
                           qwen2 ? GetInt(j, "num_experts_per_tok", path, kMaxCount, int64_t{4})
                                 : GetInt(j, "num_experts_per_tok", path, kMaxCount));
    TRACE_ASSIGN_OR_RETURN(c->moe_intermediate_size,
                           qwen2
                               ? GetInt(j, "moe_intermediate_size", path, kMaxWidth, int64_t{1408})
                               : GetInt(j, "moe_intermediate_size", path, kMaxWidth));
    TRACE_ASSIGN_OR_RETURN(c->norm_topk_prob, GetBool(j, "norm_topk_prob", path, false));
    TRACE_ASSIGN_OR_RETURN(c->decoder_sparse_step,
                           GetInt(j, "decoder_sparse_step", path, kMaxCount, int64_t{1}));
    auto it = j.find("mlp_only_layers");
    if (it != j.end() && !it->is_null()) {
      if (!it->is_array()) return InvalidArgument(path + ": field 'mlp_only_layers' is not a list");
      for (const json& v : *it) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c->num_layers) {
          return InvalidArgument(path + ": field 'mlp_only_layers' holds " + v.dump() +
                                 ", not a layer index below num_hidden_layers " +
                                 std::to_string(c->num_layers));
        }
        c->mlp_only_layers.push_back(v.get<int64_t>());
      }
    }
    if (c->num_experts > 0 && c->decoder_sparse_step <= 0) {
      return InvalidArgument(path + ": field 'decoder_sparse_step' must be positive");
    }
    if (qwen2) {
      TRACE_ASSIGN_OR_RETURN(
          c->shared_expert_intermediate_size,
          GetInt(j, "shared_expert_intermediate_size", path, kMaxWidth, int64_t{5632}));
    }
    auto shared = j.find("shared_expert_intermediate_size");
    if (!qwen2 && shared != j.end() && shared->is_number_integer() && shared->get<int64_t>() > 0) {
      // Qwen3-MoE's modelling code has no shared expert; a config asking for one is another
      // architecture (qwen2_moe) under this model_type.
      return Unsupported(path +
                         ": field 'shared_expert_intermediate_size' (a shared expert) is "
                         "not part of qwen3_moe and is not supported");
    }
  } else {
    return Status::Ok();
  }
  if (c->num_experts <= 0) return Status::Ok();  // qwen3_moe with no experts: dense
  if (c->num_experts_per_tok <= 0 || c->num_experts_per_tok > c->num_experts) {
    return InvalidArgument(path + ": field 'num_experts_per_tok' is " +
                           std::to_string(c->num_experts_per_tok) + ", it must be in 1.." +
                           std::to_string(c->num_experts) + " (the number of experts)");
  }
  if (c->moe_intermediate_size <= 0) {
    return InvalidArgument(path + ": field 'moe_intermediate_size' must be positive");
  }
  return Status::Ok();
}

// Llama 3.1's rope_scaling: every field present, finite, and factors that make the bands
// well defined (high_freq_factor > low_freq_factor > 0, factor >= 1).
Status ParseLlama3RopeScaling(const nlohmann::json& rs, const std::string& path,
                              kernels::RopeScaling* out) {
  kernels::RopeScaling r;
  r.type = kernels::RopeScaling::Type::kLlama3;
  struct Field {
    const char* name;
    double* value;
  } fields[] = {{"factor", &r.factor},
                {"low_freq_factor", &r.low_freq_factor},
                {"high_freq_factor", &r.high_freq_factor},
                {"original_max_position_embeddings", &r.original_max_position_embeddings}};
  for (const Field& f : fields) {
    auto it = rs.find(f.name);
    if (it == rs.end() || !it->is_number() || !std::isfinite(it->get<double>())) {
      return InvalidArgument(path + ": rope_scaling (llama3): field '" + f.name +
                             "' is missing or not a finite number");
    }
    *f.value = it->get<double>();
  }
  if (!(r.factor >= 1.0) || !(r.low_freq_factor > 0.0) ||
      !(r.high_freq_factor > r.low_freq_factor) || !(r.original_max_position_embeddings >= 1.0) ||
      r.original_max_position_embeddings > static_cast<double>(kMaxPositions)) {
    return InvalidArgument(path +
                           ": rope_scaling (llama3): needs factor >= 1, 0 < low_freq_factor < "
                           "high_freq_factor and original_max_position_embeddings in 1.." +
                           std::to_string(kMaxPositions));
  }
  *out = r;
  return Status::Ok();
}

// sliding_window: null, or a positive window. Mistral and Mixtral slide in every layer;
// gemma3_text in the layers layer_types (or sliding_window_pattern) names. A window at least
// as long as the context changes nothing and is kept as none.
Status ParseSlidingWindow(const json& j, const std::string& path, ModelConfig* c) {
  auto sw = j.find("sliding_window");
  if (sw == j.end() || sw->is_null()) return Status::Ok();
  if (!sw->is_number_integer() || sw->get<int64_t>() <= 0) {
    return InvalidArgument(path + ": field 'sliding_window' must be a positive integer or null");
  }
  const int64_t window = sw->get<int64_t>();
  c->sliding_window = window < c->max_position_embeddings ? window : 0;
  return Status::Ok();
}

// Which gemma3_text layers slide: `layer_types` ("sliding_attention" / "full_attention", one
// per layer) when present, else every layer but each sliding_window_pattern-th (default 6:
// five local layers, then a global one).
Status ParseGemmaLayerTypes(const json& j, const std::string& path, ModelConfig* c) {
  c->sliding_layers.assign(static_cast<size_t>(c->num_layers), 0);
  auto types = j.find("layer_types");
  if (types != j.end() && !types->is_null()) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c->num_layers) {
      return InvalidArgument(path + ": field 'layer_types' must list one type per layer (" +
                             std::to_string(c->num_layers) + ")");
    }
    for (size_t l = 0; l < types->size(); ++l) {
      const json& t = (*types)[l];
      if (t == "sliding_attention") {
        c->sliding_layers[l] = 1;
      } else if (t != "full_attention") {
        return Unsupported(path + ": field 'layer_types' holds " + EscapeForDisplay(t.dump()) +
                           " (supported: sliding_attention, full_attention)");
      }
    }
    return Status::Ok();
  }
  TRACE_ASSIGN_OR_RETURN(int64_t pattern,
                         GetInt(j, "sliding_window_pattern", path, kMaxCount, int64_t{6}));
  if (pattern <= 0)
    return InvalidArgument(path + ": field 'sliding_window_pattern' must be positive");
  for (int64_t l = 0; l < c->num_layers; ++l) {
    c->sliding_layers[static_cast<size_t>(l)] = (l + 1) % pattern != 0 ? 1 : 0;
  }
  return Status::Ok();
}

// A soft-capping field: null (none) or a positive finite number.
Result<float> GetSoftCap(const json& j, const std::string& key, const std::string& path) {
  TRACE_ASSIGN_OR_RETURN(double cap, GetNumber(j, key, path, 0.0));
  const bool positive_float =
      std::isfinite(cap) && std::isnormal(static_cast<float>(cap)) && cap > 0;
  if (cap != 0.0 && !positive_float) {
    return InvalidArgument(path + ": field '" + key + "' must be null or a positive number");
  }
  return static_cast<float>(cap);
}

// gemma3_text (Gemma3TextConfig): GeGLU with gelu_pytorch_tanh, (1 + w) RMSNorms with the
// sandwich norms and q/k norms, embeddings scaled by sqrt(hidden), query_pre_attn_scalar,
// local (sliding) and global layers with their own RoPE bases, optional final logit
// soft-capping. What it does not run is refused: attention logit soft-capping (Gemma 2),
// bidirectional attention (EmbeddingGemma), another activation.
Status ParseGemma3(const json& j, const std::string& path, ModelConfig* c) {
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    auto act = j.find(key);
    if (act == j.end() || act->is_null()) continue;
    if (*act != "gelu_pytorch_tanh") {
      return Unsupported(path + ": field '" + key + "' is " + EscapeForDisplay(act->dump()) +
                         " (gemma3_text supports gelu_pytorch_tanh)");
    }
  }
  c->hidden_activation = ModelConfig::Activation::kGeluTanh;
  c->norm_unit_offset = true;
  c->sandwich_norms = true;
  c->qk_norm = true;
  TRACE_ASSIGN_OR_RETURN(c->attention_scale_dim,
                         GetInt(j, "query_pre_attn_scalar", path, kMaxWidth, int64_t{256}));
  if (c->attention_scale_dim <= 0) {
    return InvalidArgument(path + ": field 'query_pre_attn_scalar' must be positive");
  }
  TRACE_RETURN_IF_ERROR(ParseSlidingWindow(j, path, c));
  TRACE_RETURN_IF_ERROR(ParseGemmaLayerTypes(j, path, c));
  TRACE_ASSIGN_OR_RETURN(c->rope_local_theta, GetNumber(j, "rope_local_base_freq", path, 10000.0));
  if (!(c->rope_local_theta > 0) || !std::isfinite(c->rope_local_theta)) {
    return InvalidArgument(path + ": field 'rope_local_base_freq' must be positive and finite");
  }
  TRACE_ASSIGN_OR_RETURN(c->final_logit_softcap, GetSoftCap(j, "final_logit_softcapping", path));
  TRACE_ASSIGN_OR_RETURN(float attn_cap, GetSoftCap(j, "attn_logit_softcapping", path));
  if (attn_cap != 0.0f) {
    return Unsupported(path +
                       ": field 'attn_logit_softcapping' (Gemma 2's attention soft-capping) is "
                       "not supported; only null is");
  }
  TRACE_ASSIGN_OR_RETURN(bool bidirectional,
                         GetBool(j, "use_bidirectional_attention", path, false));
  if (bidirectional) {
    return Unsupported(path +
                       ": field 'use_bidirectional_attention' (an embedding model) is "
                       "not supported; only false is");
  }
  return Status::Ok();
}

}  // namespace

float GemmaEmbeddingScale(int64_t hidden, kernels::DType dtype) {
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(hidden)));
  if (dtype == kernels::DType::kBF16)
    return kernels::Bf16ToF32(kernels::F32ToBf16RoundNearestEven(scale));
  if (dtype == kernels::DType::kF16)
    return kernels::F16ToF32(kernels::F32ToF16RoundNearestEven(scale));
  return scale;
}

const char* TorchDTypeName(kernels::DType dtype) {
  switch (dtype) {
    case kernels::DType::kF32:
      return "float32";
    case kernels::DType::kBF16:
      return "bfloat16";
    case kernels::DType::kF16:
      return "float16";
    default:  // the ggml block types have no torch name: the kernels' own
      return kernels::DTypeName(dtype);
  }
}

// A Gemma 3 checkpoint with a vision tower (Gemma3ForConditionalGeneration): its text model is
// a gemma3_text whose config is text_config, with Gemma3TextConfig's defaults for what the
// published files leave out; top-level eos and dtype apply. `path` as shown, `path_text` raw.
Result<ModelConfig> ParseGemma3VisionCheckpoint(const json& j, const std::string& path,
                                                const std::string& path_text) {
  auto tc = j.find("text_config");
  if (tc == j.end() || !tc->is_object()) {
    return InvalidArgument(path + ": model_type gemma3 needs a 'text_config' object");
  }
  json text = {{"vocab_size", 262208},      {"hidden_size", 2304},
               {"intermediate_size", 9216}, {"num_hidden_layers", 26},
               {"num_attention_heads", 8},  {"num_key_value_heads", 4},
               {"head_dim", 256},           {"max_position_embeddings", 131072},
               {"rope_theta", 1000000.0},   {"rms_norm_eps", 1e-6},
               {"sliding_window", 4096},    {"query_pre_attn_scalar", 256}};
  for (auto it = tc->begin(); it != tc->end(); ++it) text[it.key()] = it.value();
  text["model_type"] = "gemma3_text";
  for (const char* key : {"eos_token_id", "torch_dtype", "dtype"}) {
    if (j.contains(key) && !text.contains(key)) text[key] = j[key];
  }
  TRACE_ASSIGN_OR_RETURN(ModelConfig inner, ParseModelConfig(text.dump(), path_text));
  inner.multimodal_wrapper = true;
  return inner;
}

Result<ModelConfig> ParseModelConfig(const std::string& text, const std::string& path_text) {
  const std::string path = EscapePathForDisplay(path_text);  // as messages show it
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Corruption(path + ": not a JSON object");
  ModelConfig c;
  auto mt = j.find("model_type");
  if (mt == j.end() || !mt->is_string()) {
    return InvalidArgument(path + ": field 'model_type' is missing (architecture unknown)");
  }
  c.architecture = mt->get<std::string>();
  if (c.architecture == "gemma3") return ParseGemma3VisionCheckpoint(j, path, path_text);
  static constexpr const char* kArchitectures[] = {
      "qwen3", "qwen2", "llama", "mistral", "qwen3_moe", "qwen2_moe", "mixtral", "gemma3_text"};
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), c.architecture) ==
      std::end(kArchitectures)) {
    std::string names;
    for (const char* a : kArchitectures) names += std::string(names.empty() ? "" : ", ") + a;
    return Unsupported(path + ": unknown architecture '" + EscapeForDisplay(c.architecture) +
                       "' (model_type; supported: " + names + ")");
  }
  const bool gemma = c.architecture == "gemma3_text";
  TRACE_ASSIGN_OR_RETURN(c.vocab_size, GetInt(j, "vocab_size", path, kMaxVocab));
  TRACE_ASSIGN_OR_RETURN(c.hidden_size, GetInt(j, "hidden_size", path, kMaxWidth));
  TRACE_ASSIGN_OR_RETURN(c.intermediate_size, GetInt(j, "intermediate_size", path, kMaxWidth));
  TRACE_ASSIGN_OR_RETURN(c.num_layers, GetInt(j, "num_hidden_layers", path, kMaxCount));
  TRACE_ASSIGN_OR_RETURN(c.num_heads, GetInt(j, "num_attention_heads", path, kMaxCount));
  TRACE_ASSIGN_OR_RETURN(c.num_kv_heads,
                         GetInt(j, "num_key_value_heads", path, kMaxCount, c.num_heads));
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_heads <= 0 || c.num_kv_heads <= 0) {
    return InvalidArgument(path +
                           ": vocab_size, hidden_size, intermediate_size, "
                           "num_hidden_layers and the head counts must be positive");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return InvalidArgument(path + ": num_attention_heads " + std::to_string(c.num_heads) +
                           " is not a multiple of num_key_value_heads " +
                           std::to_string(c.num_kv_heads));
  }
  if (c.hidden_size % c.num_heads != 0 && !j.contains("head_dim") && !gemma) {
    return InvalidArgument(path +
                           ": hidden_size is not a multiple of num_attention_heads "
                           "and head_dim is not given");
  }
  TRACE_ASSIGN_OR_RETURN(c.head_dim, GetInt(j, "head_dim", path, kMaxWidth,
                                            gemma ? int64_t{256} : c.hidden_size / c.num_heads));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) {
    return InvalidArgument(path + ": field 'head_dim' must be positive and even (RoPE)");
  }
  if (c.num_heads * c.head_dim > kMaxWidth) {
    return InvalidArgument(path + ": num_attention_heads x head_dim (" +
                           std::to_string(c.num_heads * c.head_dim) +
                           ") is implausibly large (at most " + std::to_string(kMaxWidth) + ")");
  }
  TRACE_ASSIGN_OR_RETURN(c.max_position_embeddings,
                         GetInt(j, "max_position_embeddings", path, kMaxPositions, int64_t{4096}));
  if (c.max_position_embeddings <= 0) {
    return InvalidArgument(path + ": field 'max_position_embeddings' must be positive");
  }
  if (c.architecture == "mistral" || c.architecture == "mixtral") {
    TRACE_RETURN_IF_ERROR(ParseSlidingWindow(j, path, &c));
  }
  TRACE_ASSIGN_OR_RETURN(c.rope_theta, GetNumber(j, "rope_theta", path, 10000.0));
  TRACE_ASSIGN_OR_RETURN(double eps, GetNumber(j, "rms_norm_eps", path, 1e-6));
  c.rms_norm_eps = static_cast<float>(eps);
  // As the engine uses them: rope_theta a finite double, rms_norm_eps a positive normal
  // float (1e-50 would round to 0, 1e50 to infinity).
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta) || !std::isnormal(c.rms_norm_eps) ||
      c.rms_norm_eps < 0) {
    return InvalidArgument(path +
                           ": rope_theta and rms_norm_eps must be positive and finite "
                           "(rms_norm_eps as a float)");
  }
  auto rs = j.find("rope_scaling");
  if (rs != j.end() && !rs->is_null()) {
    std::string type;
    if (rs->is_object()) {
      if (rs->contains("rope_type") && (*rs)["rope_type"].is_string())
        type = (*rs)["rope_type"];
      else if (rs->contains("type") && (*rs)["type"].is_string())
        type = (*rs)["type"];
    }
    if (type == "llama3") {
      TRACE_RETURN_IF_ERROR(ParseLlama3RopeScaling(*rs, path, &c.rope_scaling));
    } else if (type == "linear") {
      auto factor = rs->find("factor");
      if (factor == rs->end() || !factor->is_number() || !std::isfinite(factor->get<double>()) ||
          factor->get<double>() < 1.0) {
        return InvalidArgument(path +
                               ": rope_scaling (linear): field 'factor' must be a number >= 1");
      }
      c.rope_scaling.type = kernels::RopeScaling::Type::kLinear;
      c.rope_scaling.factor = factor->get<double>();
    } else if (type != "default") {
      return Unsupported(path + ": field 'rope_scaling' (" +
                         (type.empty() ? "?" : EscapeForDisplay(type)) +
                         ") is not supported (supported: llama3, linear, default)");
    }
  }
  // Gemma3TextConfig ties by default; the others do not.
  TRACE_ASSIGN_OR_RETURN(c.tie_word_embeddings, GetBool(j, "tie_word_embeddings", path, gemma));
  // Qwen2 always carries q/k/v biases; Qwen2-MoE too unless its qkv_bias says otherwise;
  // the others say so with attention_bias.
  TRACE_ASSIGN_OR_RETURN(c.attention_bias,
                         GetBool(j, "attention_bias", path, c.architecture == "qwen2"));
  if (c.architecture == "qwen2") c.attention_bias = true;
  if (c.architecture == "qwen2_moe") {
    TRACE_ASSIGN_OR_RETURN(c.attention_bias, GetBool(j, "qkv_bias", path, true));
  }
  c.qk_norm = c.architecture == "qwen3" || c.architecture == "qwen3_moe";
  TRACE_RETURN_IF_ERROR(ParseMoe(j, path, &c));
  std::string dtype = "float32";
  for (const char* key : {"torch_dtype", "dtype"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_string()) {
      dtype = it->get<std::string>();
      break;
    }
  }
  if (dtype == "bfloat16") {
    c.dtype = kernels::DType::kBF16;
  } else if (dtype == "float16") {
    c.dtype = kernels::DType::kF16;
  } else if (dtype == "float32") {
    c.dtype = kernels::DType::kF32;
  } else {
    return Unsupported(path + ": unknown dtype '" + EscapeForDisplay(dtype) +
                       "' (torch_dtype; supported: bfloat16, float16, float32)");
  }
  TRACE_RETURN_IF_ERROR(AddEosIds(j, path, &c.eos_token_ids));
  c.attention_scale_dim = c.head_dim;
  if (gemma) {
    TRACE_RETURN_IF_ERROR(ParseGemma3(j, path, &c));
    c.embedding_scale = GemmaEmbeddingScale(c.hidden_size, c.dtype);
  }
  return c;
}

Status MergeGenerationConfig(const std::string& text, const std::string& path_text,
                             ModelConfig* config) {
  const std::string path = EscapePathForDisplay(path_text);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Corruption(path + ": not a JSON object");
  return AddEosIds(j, path, &config->eos_token_ids);
}

namespace {
nlohmann::ordered_json SlidingWindowJson(const ModelConfig& c) {
  return c.sliding_window > 0 ? nlohmann::ordered_json(c.sliding_window) : nullptr;
}
}  // namespace

std::string ModelConfigToJson(const ModelConfig& c) {
  nlohmann::ordered_json j;
  std::string arch = c.architecture == "qwen3"         ? "Qwen3ForCausalLM"
                     : c.architecture == "qwen2"       ? "Qwen2ForCausalLM"
                     : c.architecture == "qwen3_moe"   ? "Qwen3MoeForCausalLM"
                     : c.architecture == "qwen2_moe"   ? "Qwen2MoeForCausalLM"
                     : c.architecture == "mixtral"     ? "MixtralForCausalLM"
                     : c.architecture == "mistral"     ? "MistralForCausalLM"
                     : c.architecture == "gemma3_text" ? "Gemma3ForCausalLM"
                                                       : "LlamaForCausalLM";
  j["architectures"] = {arch};
  j["model_type"] = c.architecture;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  j["rms_norm_eps"] = std::stod(ShortestFloatText(c.rms_norm_eps));
  if (c.hidden_activation == ModelConfig::Activation::kGeluTanh) {
    j["hidden_activation"] = "gelu_pytorch_tanh";
  } else {
    j["hidden_act"] = "silu";
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.architecture == "qwen2_moe") {
    j["qkv_bias"] = c.attention_bias;
  } else if (c.architecture != "qwen2") {
    j["attention_bias"] = c.attention_bias;
  }
  if (c.rope_scaling.type == kernels::RopeScaling::Type::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings",
                          static_cast<int64_t>(c.rope_scaling.original_max_position_embeddings)}};
  } else if (c.rope_scaling.type == kernels::RopeScaling::Type::kLinear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (c.architecture == "qwen3_moe" || c.architecture == "qwen2_moe") {
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
    if (c.architecture == "qwen2_moe") {
      j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
      j["use_sliding_window"] = false;
    }
    j["output_router_logits"] = false;
    j["router_aux_loss_coef"] = 0.001;
  } else if (c.architecture == "mistral") {
    j["sliding_window"] = SlidingWindowJson(c);
  } else if (c.architecture == "gemma3_text") {
    j["query_pre_attn_scalar"] = c.attention_scale_dim;
    j["sliding_window"] = SlidingWindowJson(c);
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (int64_t l = 0; l < c.num_layers; ++l) {
      types.push_back(c.IsSlidingLayer(l) ? "sliding_attention" : "full_attention");
    }
    j["layer_types"] = types;
    j["rope_local_base_freq"] = c.rope_local_theta;
    j["final_logit_softcapping"] =
        c.final_logit_softcap > 0 ? nlohmann::ordered_json(c.final_logit_softcap) : nullptr;
    j["attn_logit_softcapping"] = nullptr;
  } else if (c.architecture == "mixtral") {
    j["num_local_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["sliding_window"] = SlidingWindowJson(c);
    j["output_router_logits"] = false;
    j["router_aux_loss_coef"] = 0.02;
  }
  j["torch_dtype"] = TorchDTypeName(c.dtype);
  if (c.eos_token_ids.size() == 1) {
    j["eos_token_id"] = c.eos_token_ids[0];
  } else if (!c.eos_token_ids.empty()) {
    j["eos_token_id"] = c.eos_token_ids;
  }
  return j.dump(2) + "\n";
}

}  // namespace trace::engine
