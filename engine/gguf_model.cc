// LoadGgufModel and the GGUF tokenizer (engine/gguf_model.h). Names follow llama.cpp's
// gguf-py constants (MODEL_TENSOR names, LLM_KV keys) and convert_hf_to_gguf.py.
#include "engine/gguf_model.h"

#include <openssl/evp.h>
#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "base/escape.h"
#include "base/hash.h"
#include "engine/model_config.h"

namespace trace::engine {
namespace {

using json = nlohmann::json;

// general.architecture -> the model_type trace runs it as.
struct GgufArchitecture {
  const char* gguf;
  const char* model_type;
  bool permuted_qk;  // convert_hf_to_gguf.py permutes q/k rows for llama's interleaved RoPE
};
constexpr GgufArchitecture kArchitectures[] = {
    {"llama", "llama", true},
    {"qwen2", "qwen2", false},
    {"qwen3", "qwen3", false},
};

class Meta {
 public:
  Meta(const GgufFile& f, std::string arch)
      : f_(f), arch_(std::move(arch)), path_(EscapePathForDisplay(f.path())) {}

  // `{arch}.suffix` as an unsigned integer; `fallback` < 0: required.
  Result<int64_t> Int(const std::string& suffix, int64_t fallback = -1) const {
    const std::string key = arch_ + "." + suffix;
    const json* v = f_.Find(key);
    if (v == nullptr) {
      if (fallback >= 0) return fallback;
      return InvalidArgument(path_ + ": metadata '" + key + "' is missing");
    }
    if (!v->is_number_integer() || v->get<int64_t>() < 0) {
      return InvalidArgument(path_ + ": metadata '" + key + "' is not a non-negative integer");
    }
    return v->get<int64_t>();
  }
  Result<double> Number(const std::string& suffix, std::optional<double> fallback) const {
    const std::string key = arch_ + "." + suffix;
    const json* v = f_.Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return InvalidArgument(path_ + ": metadata '" + key + "' is missing");
    }
    if (!v->is_number()) return InvalidArgument(path_ + ": metadata '" + key + "' is not a number");
    return v->get<double>();
  }
  const json* Find(const std::string& key) const { return f_.Find(key); }
  const std::string& path() const { return path_; }

 private:
  const GgufFile& f_;
  std::string arch_;
  std::string path_;
};

Result<const GgufArchitecture*> Architecture(const GgufFile& f) {
  const std::string path = EscapePathForDisplay(f.path());
  const json* a = f.Find("general.architecture");
  if (a == nullptr || !a->is_string()) {
    return InvalidArgument(path + ": metadata 'general.architecture' is missing");
  }
  for (const GgufArchitecture& arch : kArchitectures) {
    if (*a == arch.gguf) return &arch;
  }
  std::string names;
  for (const GgufArchitecture& arch : kArchitectures) {
    names += std::string(names.empty() ? "" : ", ") + arch.gguf;
  }
  return Unsupported(path + ": GGUF architecture '" + EscapeForDisplay(a->get<std::string>()) +
                     "' is not supported (supported: " + names + ")");
}

const char* TypeName(GgmlType t) {
  return FindGgmlType(static_cast<uint32_t>(t))->name;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Result<kernels::DType> WeightDType(const GgufTensor& t, const std::string& path) {
  switch (t.type) {
    case GgmlType::kF32:
      return kernels::DType::kF32;
    case GgmlType::kF16:
      return kernels::DType::kF16;
    case GgmlType::kBF16:
      return kernels::DType::kBF16;
    case GgmlType::kQ8_0:
      return kernels::DType::kQ8_0;
    case GgmlType::kQ4_0:
      return kernels::DType::kQ4_0;
    case GgmlType::kQ5_0:
      return kernels::DType::kQ5_0;
    case GgmlType::kQ4_1:
      return kernels::DType::kQ4_1;
    case GgmlType::kQ5_1:
      return kernels::DType::kQ5_1;
    case GgmlType::kQ4_K:
      return kernels::DType::kQ4_K;
    case GgmlType::kQ5_K:
      return kernels::DType::kQ5_K;
    case GgmlType::kQ6_K:
      return kernels::DType::kQ6_K;
    default:
      return Unsupported(path + ": tensor '" + EscapeForDisplay(t.name) + "' is " +
                         TypeName(t.type) +
                         ": this quantization is not supported yet (F32, F16, BF16, Q8_0, Q4_0, "
                         "Q5_0, Q4_1, Q5_1, Q4_K, Q5_K and Q6_K are)");
  }
}

class GgufModel final : public Model {
 public:
  const std::string& dir() const override { return path_; }
  const ModelConfig& config() const override { return config_; }
  const ModelFingerprint& fingerprint() const override { return fingerprint_; }
  const ModelWeights& weights() const override { return weights_; }

  Status LoadFrom(const std::string& path, bool hash_weights);

 private:
  // The tensor `name` with Hugging Face shape `shape` ([rows, cols] or [n]): GGUF lists the
  // dimensions innermost first, so its dims are the reverse.
  Result<kernels::WeightView> Tensor(const std::string& name, std::vector<int64_t> shape);
  Result<const float*> Bias(const std::string& name, int64_t n);
  // Puts the rows of a q/k matrix permuted by convert_hf_to_gguf.py back in Hugging Face's
  // rotate-half order (a copy): GGUF row h * D + 2 i + a holds HF row h * D + a * D / 2 + i.
  Result<kernels::WeightView> Unpermuted(const kernels::WeightView& w, int64_t heads);

  std::string path_;
  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  ModelFingerprint fingerprint_;
  ModelWeights weights_;
  std::vector<std::vector<uint8_t>> copies_;  // f32 biases, unpermuted q/k rows
};

Result<kernels::WeightView> GgufModel::Tensor(const std::string& name, std::vector<int64_t> shape) {
  const std::string path = EscapePathForDisplay(path_);
  const GgufTensor* t = file_->FindTensor(name);
  if (t == nullptr) return NotFound(path + ": tensor '" + EscapeForDisplay(name) + "' is missing");
  const std::vector<int64_t> want(shape.rbegin(), shape.rend());
  if (t->dims != want) {
    return InvalidArgument(path + ": tensor '" + EscapeForDisplay(name) + "' has dims " +
                           DimsText(t->dims) + ", the metadata needs " + DimsText(want));
  }
  TRACE_ASSIGN_OR_RETURN(kernels::DType dtype, WeightDType(*t, path));
  kernels::WeightView v;
  v.data = t->data;
  v.dtype = dtype;
  v.rows = shape.size() == 2 ? shape[0] : 1;
  v.cols = shape.back();
  // Q8_0 / Q4_0 / Q5_0 / Q4_1 / Q5_1 scales are read as 16-bit words; K-quant blocks byte by
  // byte.
  const size_t align = kernels::IsQuantized(dtype) ? 2
                       : kernels::IsKQuant(dtype)  ? 1
                                                   : kernels::DTypeSize(dtype);
  if (reinterpret_cast<uintptr_t>(t->data) % align != 0) {
    return Corruption(path + ": tensor '" + EscapeForDisplay(name) +
                      "' is not aligned to its element size");
  }
  weights_.bytes += static_cast<int64_t>(t->bytes);
  fingerprint_.parameter_count += t->numel();
  return v;
}

Result<const float*> GgufModel::Bias(const std::string& name, int64_t n) {
  TRACE_ASSIGN_OR_RETURN(kernels::WeightView v, Tensor(name, {n}));
  std::vector<uint8_t> copy(static_cast<size_t>(n) * 4);
  float* out = reinterpret_cast<float*>(copy.data());
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = static_cast<const uint8_t*>(v.data);
    if (v.dtype == kernels::DType::kF32) {
      std::memcpy(&out[i], p + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = v.dtype == kernels::DType::kBF16 ? kernels::Bf16ToF32(h) : kernels::F16ToF32(h);
    }
  }
  copies_.push_back(std::move(copy));
  return reinterpret_cast<const float*>(copies_.back().data());
}

Result<kernels::WeightView> GgufModel::Unpermuted(const kernels::WeightView& w, int64_t heads) {
  const int64_t D = w.rows / heads, half = D / 2;
  const size_t row_bytes = kernels::WeightBytes(w.dtype, 1, w.cols);
  std::vector<uint8_t> copy(row_bytes * static_cast<size_t>(w.rows));
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < half; ++i) {
      for (int64_t a = 0; a < 2; ++a) {
        const int64_t gguf_row = h * D + 2 * i + a, hf_row = h * D + a * half + i;
        std::memcpy(copy.data() + hf_row * row_bytes, src + gguf_row * row_bytes, row_bytes);
      }
    }
  }
  copies_.push_back(std::move(copy));
  kernels::WeightView out = w;
  out.data = copies_.back().data();
  return out;
}

Status GgufModel::LoadFrom(const std::string& path, bool hash_weights) {
  path_ = path;
  TRACE_ASSIGN_OR_RETURN(file_, GgufFile::Open(path));
  TRACE_ASSIGN_OR_RETURN(const GgufArchitecture* arch, Architecture(*file_));
  TRACE_ASSIGN_OR_RETURN(config_, GgufModelConfig(*file_));
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t QD = c.num_heads * D, KVD = c.num_kv_heads * D;
  TRACE_ASSIGN_OR_RETURN(weights_.embed_tokens, Tensor("token_embd.weight", {c.vocab_size, H}));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights lw;
    TRACE_ASSIGN_OR_RETURN(lw.input_norm, Tensor(p + "attn_norm.weight", {H}));
    TRACE_ASSIGN_OR_RETURN(lw.q_proj, Tensor(p + "attn_q.weight", {QD, H}));
    TRACE_ASSIGN_OR_RETURN(lw.k_proj, Tensor(p + "attn_k.weight", {KVD, H}));
    if (arch->permuted_qk) {
      TRACE_ASSIGN_OR_RETURN(lw.q_proj, Unpermuted(lw.q_proj, c.num_heads));
      TRACE_ASSIGN_OR_RETURN(lw.k_proj, Unpermuted(lw.k_proj, c.num_kv_heads));
    }
    TRACE_ASSIGN_OR_RETURN(lw.v_proj, Tensor(p + "attn_v.weight", {KVD, H}));
    TRACE_ASSIGN_OR_RETURN(lw.o_proj, Tensor(p + "attn_output.weight", {H, QD}));
    if (c.attention_bias) {
      TRACE_ASSIGN_OR_RETURN(lw.q_bias, Bias(p + "attn_q.bias", QD));
      TRACE_ASSIGN_OR_RETURN(lw.k_bias, Bias(p + "attn_k.bias", KVD));
      TRACE_ASSIGN_OR_RETURN(lw.v_bias, Bias(p + "attn_v.bias", KVD));
    }
    if (c.qk_norm) {
      TRACE_ASSIGN_OR_RETURN(lw.q_norm, Tensor(p + "attn_q_norm.weight", {D}));
      TRACE_ASSIGN_OR_RETURN(lw.k_norm, Tensor(p + "attn_k_norm.weight", {D}));
    }
    TRACE_ASSIGN_OR_RETURN(lw.ffn_norm, Tensor(p + "ffn_norm.weight", {H}));
    TRACE_ASSIGN_OR_RETURN(lw.gate_proj, Tensor(p + "ffn_gate.weight", {I, H}));
    TRACE_ASSIGN_OR_RETURN(lw.up_proj, Tensor(p + "ffn_up.weight", {I, H}));
    TRACE_ASSIGN_OR_RETURN(lw.down_proj, Tensor(p + "ffn_down.weight", {H, I}));
    weights_.layers.push_back(lw);
  }
  TRACE_ASSIGN_OR_RETURN(weights_.final_norm, Tensor("output_norm.weight", {H}));
  if (c.tie_word_embeddings) {
    weights_.lm_head = weights_.embed_tokens;
  } else {
    TRACE_ASSIGN_OR_RETURN(weights_.lm_head, Tensor("output.weight", {c.vocab_size, H}));
  }

  fingerprint_.architecture = c.architecture;
  fingerprint_.dtype =
      "gguf " + std::string(TypeName(file_->FindTensor("blk.0.attn_q.weight")->type));
  // The header (metadata and tensor infos) is the file's config; the weights hash is the
  // whole file, so a re-quantized or re-converted file is another model.
  fingerprint_.config_sha256 = Sha256Hex(file_->bytes().substr(0, file_->data_offset()));
  if (hash_weights) {
    fingerprint_.weights_sha256 = Sha256Hex(file_->bytes());
    madvise(const_cast<char*>(file_->bytes().data()), file_->bytes().size(), MADV_DONTNEED);
  }
  auto tokenizer = GgufTokenizer(*file_);
  if (tokenizer.ok()) fingerprint_.tokenizer_sha256 = Sha256Hex(tokenizer->tokenizer_json);
  if (const json* t = file_->Find("tokenizer.chat_template"); t != nullptr && t->is_string()) {
    fingerprint_.chat_template_sha256 = Sha256Hex(t->get<std::string>());
  }
  return Status::Ok();
}

// The pre-tokenizers of the tokenizer.json files that llama.cpp's converter names by
// tokenizer.ggml.pre (their Split regex, then ByteLevel without its own regex), with the
// normalizer and ignore_merges those files have.
struct PreTokenizer {
  const char* name;
  const char* regex;
  bool nfc;
  bool ignore_merges;
};
constexpr PreTokenizer kPreTokenizers[] = {
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     true, false},
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     false, true},
};

}  // namespace

Result<ModelConfig> GgufModelConfig(const GgufFile& f) {
  TRACE_ASSIGN_OR_RETURN(const GgufArchitecture* arch, Architecture(f));
  const Meta m(f, arch->gguf);
  const GgufTensor* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr || embd->dims.size() != 2) {
    return NotFound(m.path() + ": tensor 'token_embd.weight' is missing or not a matrix");
  }
  // The hyper-parameters as config.json spells them, so that ParseModelConfig applies the
  // same bounds and checks to both formats.
  json hf;
  hf["model_type"] = arch->model_type;
  hf["vocab_size"] = embd->dims[1];
  TRACE_ASSIGN_OR_RETURN(int64_t hidden, m.Int("embedding_length"));
  TRACE_ASSIGN_OR_RETURN(int64_t heads, m.Int("attention.head_count"));
  hf["hidden_size"] = hidden;
  TRACE_ASSIGN_OR_RETURN(hf["intermediate_size"], m.Int("feed_forward_length"));
  TRACE_ASSIGN_OR_RETURN(hf["num_hidden_layers"], m.Int("block_count"));
  hf["num_attention_heads"] = heads;
  TRACE_ASSIGN_OR_RETURN(hf["num_key_value_heads"], m.Int("attention.head_count_kv", heads));
  TRACE_ASSIGN_OR_RETURN(int64_t head_dim,
                         m.Int("attention.key_length", heads > 0 ? hidden / heads : 0));
  hf["head_dim"] = head_dim;
  TRACE_ASSIGN_OR_RETURN(int64_t value_dim, m.Int("attention.value_length", head_dim));
  TRACE_ASSIGN_OR_RETURN(int64_t rope_dims, m.Int("rope.dimension_count", head_dim));
  if (value_dim != head_dim || rope_dims != head_dim) {
    return Unsupported(m.path() + ": attention.value_length " + std::to_string(value_dim) +
                       " and rope.dimension_count " + std::to_string(rope_dims) +
                       " must equal the key length " + std::to_string(head_dim));
  }
  TRACE_ASSIGN_OR_RETURN(hf["max_position_embeddings"], m.Int("context_length"));
  TRACE_ASSIGN_OR_RETURN(hf["rope_theta"], m.Number("rope.freq_base", 10000.0));
  TRACE_ASSIGN_OR_RETURN(hf["rms_norm_eps"], m.Number("attention.layer_norm_rms_epsilon", {}));
  hf["tie_word_embeddings"] = f.FindTensor("output.weight") == nullptr;
  hf["attention_bias"] = f.FindTensor("blk.0.attn_q.bias") != nullptr;
  if (const json* st = m.Find(std::string(arch->gguf) + ".rope.scaling.type")) {
    if (*st == "linear") {
      TRACE_ASSIGN_OR_RETURN(double factor, m.Number("rope.scaling.factor", {}));
      hf["rope_scaling"] = {{"rope_type", "linear"}, {"factor", factor}};
    } else if (*st != "none") {
      return Unsupported(m.path() + ": metadata '" + arch->gguf + ".rope.scaling.type' is " +
                         EscapeForDisplay(st->dump()) + " (supported: none, linear)");
    }
  }
  if (arch->permuted_qk) {
    // Reject what would make the permutation ambiguous before ParseModelConfig reads it.
    if (heads <= 0 || head_dim % 2 != 0) {
      return InvalidArgument(m.path() + ": head count and key length must be positive and even");
    }
  }
  hf["torch_dtype"] = "float32";
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const json* id = f.Find(key);
    if (id != nullptr && id->is_number_unsigned()) hf["eos_token_id"].push_back(*id);
  }
  TRACE_ASSIGN_OR_RETURN(ModelConfig c, ParseModelConfig(hf.dump(), f.path() + " (GGUF metadata)"));
  if (const GgufTensor* freqs = f.FindTensor("rope_freqs.weight")) {
    // How convert_hf_to_gguf.py stores Llama 3's RoPE scaling: a divisor per frequency.
    if (freqs->type != GgmlType::kF32 || freqs->dims != std::vector<int64_t>{c.head_dim / 2}) {
      return InvalidArgument(m.path() + ": tensor 'rope_freqs.weight' must be F32 [" +
                             std::to_string(c.head_dim / 2) + "]");
    }
    c.rope_scaling = kernels::RopeScaling{};
    c.rope_scaling.type = kernels::RopeScaling::Type::kFreqFactors;
    c.rope_scaling.freq_factors.resize(static_cast<size_t>(c.head_dim / 2));
    std::memcpy(c.rope_scaling.freq_factors.data(), freqs->data, freqs->bytes);
    for (float v : c.rope_scaling.freq_factors) {
      if (!(v > 0.0f) || !std::isfinite(v)) {
        return InvalidArgument(m.path() + ": tensor 'rope_freqs.weight' holds " +
                               std::to_string(v) + ", not a positive divisor");
      }
    }
  }
  if (const GgufTensor* q = f.FindTensor("blk.0.attn_q.weight")) {
    if (q->type == GgmlType::kBF16) c.dtype = kernels::DType::kBF16;
    if (q->type == GgmlType::kF16) c.dtype = kernels::DType::kF16;
  }
  return c;
}

Result<GgufTokenizerFiles> GgufTokenizer(const GgufFile& f) {
  const std::string path = EscapePathForDisplay(f.path());
  auto get = [&](const char* key) { return f.Find(key); };
  const json* model = get("tokenizer.ggml.model");
  if (model == nullptr || !model->is_string()) {
    return NotFound(path + ": metadata 'tokenizer.ggml.model' is missing (no tokenizer)");
  }
  if (*model != "gpt2") {
    return Unsupported(path + ": tokenizer.ggml.model " + EscapeForDisplay(model->dump()) +
                       " is not supported yet (gpt2, the byte-level BPE, is)");
  }
  const json* pre_name = get("tokenizer.ggml.pre");
  const PreTokenizer* pre = nullptr;
  for (const PreTokenizer& p : kPreTokenizers) {
    if (pre_name != nullptr && *pre_name == p.name) pre = &p;
  }
  if (pre == nullptr) {
    return Unsupported(path + ": tokenizer.ggml.pre " +
                       (pre_name ? EscapeForDisplay(pre_name->dump()) : std::string("(missing)")) +
                       " is not supported (supported: qwen2, llama-bpe)");
  }
  const json* tokens = get("tokenizer.ggml.tokens");
  const json* merges = get("tokenizer.ggml.merges");
  const json* types = get("tokenizer.ggml.token_type");
  if (tokens == nullptr || !tokens->is_array() || merges == nullptr || !merges->is_array()) {
    return InvalidArgument(path +
                           ": tokenizer.ggml.tokens and tokenizer.ggml.merges must be lists");
  }
  if (types != nullptr && (!types->is_array() || types->size() != tokens->size())) {
    return InvalidArgument(path + ": tokenizer.ggml.token_type must list one type per token");
  }
  // llama_token_type: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte.
  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens->size(); ++id) {
    const json& t = (*tokens)[id];
    if (!t.is_string()) return InvalidArgument(path + ": tokenizer.ggml.tokens holds a non-string");
    const int64_t type =
        types != nullptr && (*types)[id].is_number_integer() ? (*types)[id].get<int64_t>() : 1;
    if (type == 5) continue;  // UNUSED: padding ids the vocabulary never produces
    vocab[t.get<std::string>()] = id;
    if (type == 3 || type == 4) {
      added.push_back({{"id", id},
                       {"content", t},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == 3}});
    }
  }
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  json tok = {{"version", "1.0"},
              {"added_tokens", added},
              {"normalizer", pre->nfc ? json{{"type", "NFC"}} : json(nullptr)},
              {"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "Split"},
                   {"pattern", {{"Regex", pre->regex}}},
                   {"behavior", "Isolated"},
                   {"invert", false}},
                  byte_level}}}},
              {"post_processor", nullptr},
              {"decoder", byte_level},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", pre->ignore_merges},
                {"vocab", vocab},
                {"merges", *merges}}}};
  json config = json::object();
  auto special = [&](const char* key, const char* field) {
    const json* id = get(key);
    if (id != nullptr && id->is_number_unsigned() && id->get<uint64_t>() < tokens->size()) {
      config[field] = (*tokens)[id->get<size_t>()];
    }
  };
  special("tokenizer.ggml.bos_token_id", "bos_token");
  special("tokenizer.ggml.eos_token_id", "eos_token");
  if (const json* t = get("tokenizer.chat_template"); t != nullptr && t->is_string()) {
    config["chat_template"] = *t;
  }
  return GgufTokenizerFiles{tok.dump(), config.dump()};
}

Result<std::shared_ptr<const Model>> LoadGgufModel(const std::string& path, bool hash_weights) {
  auto model = std::make_shared<GgufModel>();
  TRACE_RETURN_IF_ERROR(model->LoadFrom(path, hash_weights));
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace trace::engine
