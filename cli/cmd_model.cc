// `trace model init` (seeded random models in the real formats) and `trace model info`.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/float_text.h"
#include "base/json_print.h"
#include "cli/command.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "engine/model_config.h"
#include "engine/model_init.h"

namespace trace::cli::cmd_model {
namespace {

// How many layers slide (Gemma 3's local layers, every layer of a windowed Mistral).
int64_t SlidingLayerCount(const engine::ModelConfig& c) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) n += c.IsSlidingLayer(l) ? 1 : 0;
  return n;
}

namespace fs = std::filesystem;

struct InitArgs {
  std::string preset = "tiny";
  uint64_t seed = 0;
  int shards = 0;  // 0: the preset's default
  std::string out_dir;
};

struct InfoArgs {
  std::string dir;
  bool json = false;
  bool no_hash = false;
};

int RunInit(const InitArgs& args) {
  Status st = args.shards > 0 ? engine::InitModel(args.preset, args.seed, args.out_dir, args.shards)
                              : engine::InitModel(args.preset, args.seed, args.out_dir);
  if (!st.ok()) return ReportError(st.WithContext("model init"));
  if (!Globals().quiet) {
    std::cout << "wrote " << args.preset << " (seed " << args.seed << ") to " << args.out_dir
              << "\n";
  }
  return kExitOk;
}

// A GGUF file's version and how many tensors of each ggml type it holds: into `j` ("gguf")
// and as text ("Q8_0 x 169, F32 x 121"). Nothing for a folder.
int AddGgufTypes(const std::string& path, nlohmann::ordered_json* j, std::string* text) {
  if (!engine::IsGgufFile(path)) return kExitOk;
  auto file = engine::GgufFile::Open(path);
  if (!file.ok()) return ReportError(file.status());
  const std::map<std::string, int64_t> counts = (*file)->TensorTypeCounts();
  (*j)["gguf"] = {{"version", (*file)->version()}, {"tensor_types", counts}};
  for (const auto& [type, n] : counts) {
    *text += (text->empty() ? "" : ", ") + type + " x " + std::to_string(n);
  }
  return kExitOk;
}

int RunInfo(const InfoArgs& args) {
  auto loaded = engine::Model::Load(args.dir, /*hash_weights=*/!args.no_hash);
  if (!loaded.ok()) return ReportError(loaded.status());
  const engine::Model& model = **loaded;
  const engine::ModelConfig& c = model.config();
  const engine::ModelFingerprint& fp = model.fingerprint();
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::is_directory(args.dir, ec)) {  // a GGUF file is its own weight file
    files.push_back(fs::path(args.dir).filename().string());
  } else {
    for (fs::directory_iterator it(args.dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name.ends_with(".safetensors")) files.push_back(name);
    }
  }
  if (ec) return ReportError(IOError(args.dir + ": cannot list: " + ec.message()));
  std::sort(files.begin(), files.end());
  nlohmann::ordered_json j;
  j["dir"] = model.dir();
  j["architecture"] = c.architecture;
  j["dtype"] = fp.dtype;
  j["parameters"] = fp.parameter_count;
  j["weights_bytes"] = model.weights().bytes;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_layers"] = c.num_layers;
  j["num_heads"] = c.num_heads;
  j["num_kv_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  // As config.json spells them (the same writer as `model init`).
  const nlohmann::json written = nlohmann::json::parse(engine::ModelConfigToJson(c));
  j["rope_scaling"] = written["rope_scaling"];
  j["hidden_activation"] = c.hidden_activation == engine::ModelConfig::Activation::kGeluTanh
                               ? "gelu_pytorch_tanh"
                               : "silu";
  j["attention_scale_dim"] = c.attention_scale_dim;
  j["sliding_window"] = c.sliding_window > 0 ? nlohmann::json(c.sliding_window) : nullptr;
  j["sliding_layers"] = SlidingLayerCount(c);
  j["rope_local_theta"] = c.rope_local_theta > 0 ? nlohmann::json(c.rope_local_theta) : nullptr;
  j["final_logit_softcapping"] =
      c.final_logit_softcap > 0 ? nlohmann::json(c.final_logit_softcap) : nullptr;
  j["rms_norm_eps"] = std::stod(ShortestFloatText(c.rms_norm_eps));
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["qk_norm"] = c.qk_norm;
  j["eos_token_ids"] = c.eos_token_ids;
  if (c.num_experts > 0) {
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) moe_layers += c.IsMoeLayer(l) ? 1 : 0;
    j["moe"] = {{"num_experts", c.num_experts},
                {"num_experts_per_tok", c.num_experts_per_tok},
                {"moe_intermediate_size", c.moe_intermediate_size},
                {"norm_topk_prob", c.norm_topk_prob},
                {"shared_expert_intermediate_size", c.shared_expert_intermediate_size},
                {"moe_layers", moe_layers}};
  }
  j["weight_files"] = files;
  std::string gguf_types;
  if (int rc = AddGgufTypes(args.dir, &j, &gguf_types); rc != kExitOk) return rc;
  j["fingerprint"] = {{"weights_sha256", fp.weights_sha256},
                      {"config_sha256", fp.config_sha256},
                      {"tokenizer_sha256", fp.tokenizer_sha256},
                      {"chat_template_sha256", fp.chat_template_sha256}};
  if (args.json) {
    PrintJson(std::cout, j, 2);
    return kExitOk;
  }
  auto dash = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  std::printf("model          %s\n", model.dir().c_str());
  std::printf("architecture   %s (%s)\n", c.architecture.c_str(), fp.dtype.c_str());
  std::printf("parameters     %lld (%.1f MB of weights)\n",
              static_cast<long long>(fp.parameter_count), model.weights().bytes / 1e6);
  std::printf("vocab          %lld\n", static_cast<long long>(c.vocab_size));
  std::printf("layers         %lld x (hidden %lld, mlp %lld)\n",
              static_cast<long long>(c.num_layers), static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.intermediate_size));
  if (c.num_experts > 0) {
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) moe_layers += c.IsMoeLayer(l) ? 1 : 0;
    std::printf("experts        %lld per MoE layer (%lld of %lld layers), top %lld, width %lld%s\n",
                static_cast<long long>(c.num_experts), static_cast<long long>(moe_layers),
                static_cast<long long>(c.num_layers), static_cast<long long>(c.num_experts_per_tok),
                static_cast<long long>(c.moe_intermediate_size),
                c.norm_topk_prob ? ", top-k renormalised" : "");
    if (c.shared_expert_intermediate_size > 0) {
      std::printf("shared expert  width %lld, on every row, sigmoid-gated\n",
                  static_cast<long long>(c.shared_expert_intermediate_size));
    }
  }
  std::printf("attention      %lld heads, %lld kv heads, head_dim %lld%s%s\n",
              static_cast<long long>(c.num_heads), static_cast<long long>(c.num_kv_heads),
              static_cast<long long>(c.head_dim), c.attention_bias ? ", q/k/v bias" : "",
              c.qk_norm ? ", q/k norm" : "");
  if (c.sliding_window > 0 || c.attention_scale_dim != c.head_dim) {
    std::string window = "none";
    if (c.sliding_window > 0) {
      window = std::to_string(c.sliding_window) + " positions on " +
               std::to_string(SlidingLayerCount(c)) + " of " + std::to_string(c.num_layers) +
               " layers";
    }
    std::printf("sliding window %s; scale 1/sqrt(%lld)\n", window.c_str(),
                static_cast<long long>(c.attention_scale_dim));
  }
  if (c.hidden_activation == engine::ModelConfig::Activation::kGeluTanh) {
    std::printf("mlp            GeGLU (gelu_pytorch_tanh)%s%s\n",
                c.sandwich_norms ? ", pre- and post-norms" : "",
                c.norm_unit_offset ? ", norms scale by 1 + w" : "");
  }
  std::string scaling;
  if (c.rope_scaling.type == kernels::RopeScaling::Type::kLinear) {
    scaling = ", linear scaling (factor " +
              ShortestFloatText(static_cast<float>(c.rope_scaling.factor)) + ")";
  }
  if (c.rope_local_theta > 0) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "; local layers theta %g", c.rope_local_theta);
    scaling += buf;
  }
  if (c.rope_scaling.type == kernels::RopeScaling::Type::kLlama3) {
    char buf[160];
    std::snprintf(buf, sizeof buf, ", llama3 scaling (factor %g, low %g, high %g, original %g)",
                  c.rope_scaling.factor, c.rope_scaling.low_freq_factor,
                  c.rope_scaling.high_freq_factor, c.rope_scaling.original_max_position_embeddings);
    scaling = buf;
  }
  std::printf("rope           theta %g%s, max positions %lld\n", c.rope_theta, scaling.c_str(),
              static_cast<long long>(c.max_position_embeddings));
  std::printf("rms norm eps   %g\n", static_cast<double>(c.rms_norm_eps));
  std::printf("tied embedding %s\n", c.tie_word_embeddings ? "yes" : "no");
  if (c.final_logit_softcap > 0) {
    std::printf("logit softcap  %g\n", static_cast<double>(c.final_logit_softcap));
  }
  std::string eos;
  for (int32_t id : c.eos_token_ids) eos += (eos.empty() ? "" : ", ") + std::to_string(id);
  std::printf("eos ids        %s\n", dash(eos).c_str());
  std::string file_list;
  for (const auto& f : files) file_list += (file_list.empty() ? "" : ", ") + f;
  std::printf("weight files   %s\n", file_list.c_str());
  if (!gguf_types.empty()) std::printf("tensor types   %s\n", gguf_types.c_str());
  std::printf("weights sha256 %s\n", dash(fp.weights_sha256).c_str());
  std::printf("config sha256  %s\n", fp.config_sha256.c_str());
  std::printf("tokenizer      %s\n", dash(fp.tokenizer_sha256).c_str());
  std::printf("chat template  %s\n", dash(fp.chat_template_sha256).c_str());
  return kExitOk;
}

void Setup(CLI::App& app, int* exit_code) {
  auto* model = app.add_subcommand("model", "Create (seeded random) or inspect model folders");
  model->require_subcommand(1);

  auto init_args = std::make_shared<InitArgs>();
  auto* init = model->add_subcommand(
      "init", "Write a model folder with seeded random weights in the real formats");
  init->add_option(
          "--preset", init_args->preset,
          "tiny | qwen3-0.6b | qwen2.5-0.5b | qwen3-moe-tiny | "
          "qwen3-moe-a3b-narrow (128 experts, 8 per token) | mixtral-tiny |\n"
          "qwen2-moe-tiny (top 4 + a shared expert) | llama3.2-1b | llama3-tiny (Llama 3's\n"
          "layout, RoPE scaling, tokenizer and chat template) | mistral-tiny (a SentencePiece\n"
          "tokenizer; completions only)")
      ->check(CLI::IsMember(engine::ModelPresetNames()));
  init->add_option("--seed", init_args->seed, "Seed of the random weights");
  init->add_option("--shards", init_args->shards,
                   "Number of safetensors shards (default: 2 for qwen2.5-0.5b, else 1)")
      ->check(CLI::Range(1, 64));
  init->add_option("OUT_DIR", init_args->out_dir, "Folder to write")->required();
  init->callback([init_args, exit_code] { *exit_code = RunInit(*init_args); });

  auto info_args = std::make_shared<InfoArgs>();
  auto* info = model->add_subcommand(
      "info", "Architecture, shapes, parameter count, dtype and fingerprints of a model");
  info->add_option("MODEL", info_args->dir, "Model folder or GGUF file")->required();
  info->add_flag("--json", info_args->json, "Print JSON");
  info->add_flag("--no-hash", info_args->no_hash, "Skip hashing the weights (fast)");
  info->callback([info_args, exit_code] { *exit_code = RunInfo(*info_args); });
}

TRACE_REGISTER_COMMAND(500, Setup);

}  // namespace
}  // namespace trace::cli::cmd_model
