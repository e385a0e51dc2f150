// Model loading: config.json parsing, the safetensors reader and writer, sharded folders,
// `trace model init` presets, fingerprints, and the one-line errors for broken models.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/hash.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "engine_test_util.h"

namespace trace::engine {
namespace {

using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;
namespace fs = std::filesystem;

const char* kQwen3Config = R"({
  "model_type": "qwen3", "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 96,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "eos_token_id": 7, "max_position_embeddings": 512})";

TEST(ModelConfigTest, ParsesQwen3WithDefaults) {
  auto c = ParseModelConfig(kQwen3Config, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "qwen3");
  EXPECT_EQ(c->head_dim, 16);  // hidden / heads when absent
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->dtype, kernels::DType::kBF16);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{7});
  ASSERT_TRUE(MergeGenerationConfig(R"({"eos_token_id": [9, 7]})", "g.json", &*c).ok());
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{7, 9}));
}

TEST(ModelConfigTest, Qwen2HasBiasLlamaDoesNot) {
  nlohmann::json j = nlohmann::json::parse(kQwen3Config);
  j["model_type"] = "qwen2";
  auto q2 = ParseModelConfig(j.dump(), "config.json");
  ASSERT_TRUE(q2.ok());
  EXPECT_TRUE(q2->attention_bias);
  EXPECT_FALSE(q2->qk_norm);
  j["model_type"] = "llama";
  j.erase("num_key_value_heads");
  j["head_dim"] = 32;
  auto llama = ParseModelConfig(j.dump(), "config.json");
  ASSERT_TRUE(llama.ok());
  EXPECT_FALSE(llama->attention_bias);
  EXPECT_EQ(llama->num_kv_heads, 4);  // defaults to the head count (no GQA)
  EXPECT_EQ(llama->head_dim, 32);
}

// gemma-3-1b-it's config.json as Google publishes it: every field the engine uses read as
// transformers' Gemma3TextConfig reads it.
TEST(ModelConfigTest, ParsesGemma3TextAsPublished) {
  const char* kGemma31b = R"({
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "attn_logit_softcapping": null, "bos_token_id": 2, "cache_implementation": "hybrid",
    "eos_token_id": [1, 106], "final_logit_softcapping": null, "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "initializer_range": 0.02,
    "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
    "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06,
    "rope_local_base_freq": 10000, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": 512, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
    "transformers_version": "4.50.0.dev0", "use_cache": true, "vocab_size": 262144})";
  auto c = ParseModelConfig(kGemma31b, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "gemma3_text");
  EXPECT_EQ(c->hidden_activation, ModelConfig::Activation::kGeluTanh);
  EXPECT_TRUE(c->norm_unit_offset && c->sandwich_norms && c->qk_norm && c->tie_word_embeddings);
  EXPECT_EQ(c->attention_scale_dim, 256);
  EXPECT_EQ(c->sliding_window, 512);
  for (int64_t l = 0; l < 26; ++l) {  // every sixth layer global: 5, 11, 17, 23
    EXPECT_EQ(c->IsSlidingLayer(l), (l + 1) % 6 != 0) << l;
    EXPECT_EQ(c->UsesLocalRope(l), (l + 1) % 6 != 0) << l;
  }
  EXPECT_EQ(c->FirstVisiblePosition(0, 511), 0);
  EXPECT_EQ(c->FirstVisiblePosition(0, 512), 1);
  EXPECT_EQ(c->FirstVisiblePosition(5, 4000), 0);
  EXPECT_DOUBLE_EQ(c->rope_local_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1000000.0);
  EXPECT_EQ(c->final_logit_softcap, 0.0f);
  EXPECT_EQ(c->embedding_scale, 34.0f);  // bf16(sqrt(1152) = 33.94)
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1, 106}));
  // The newer transformers spell the layers out in layer_types; the same model.
  nlohmann::json j = nlohmann::json::parse(kGemma31b);
  j.erase("sliding_window_pattern");
  j["layer_types"] = nlohmann::json::array();
  for (int l = 0; l < 26; ++l) {
    j["layer_types"].push_back((l + 1) % 6 ? "sliding_attention" : "full_attention");
  }
  auto typed = ParseModelConfig(j.dump(), "config.json");
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ(typed->sliding_layers, c->sliding_layers);
  // An f32 checkpoint keeps sqrt(hidden) in float32.
  j["torch_dtype"] = "float32";
  auto f32 = ParseModelConfig(j.dump(), "config.json");
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->embedding_scale, static_cast<float>(std::sqrt(1152.0)));
}

// gemma-3-4b-it's config.json as published: a sparse text_config over Gemma3TextConfig's
// defaults, the vision tower's config beside it.
TEST(ModelConfigTest, ParsesGemma3WithAVisionTowerAsItsTextModel) {
  const char* kGemma34b = R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999,
    "eoi_token_index": 256000, "eos_token_id": [1, 106], "image_token_index": 262144,
    "initializer_range": 0.02, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16,
                      "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": false}})";
  auto c = ParseModelConfig(kGemma34b, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->architecture, "gemma3_text");
  EXPECT_TRUE(c->multimodal_wrapper);
  EXPECT_EQ(c->vocab_size, 262208);
  EXPECT_EQ(c->hidden_size, 2560);
  EXPECT_EQ(c->num_layers, 34);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->attention_scale_dim, 256);
  EXPECT_EQ(c->sliding_window, 1024);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_EQ(c->rope_scaling.type, kernels::RopeScaling::Type::kLinear);
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->dtype, kernels::DType::kBF16);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(c->embedding_scale, 50.5f);  // bf16(sqrt(2560) = 50.596)
  for (int64_t l = 0; l < 34; ++l) EXPECT_EQ(c->IsSlidingLayer(l), (l + 1) % 6 != 0) << l;
}

TEST(ModelConfigTest, ErrorsNameFileAndField) {
  nlohmann::json j = nlohmann::json::parse(kQwen3Config);
  j["model_type"] = "gpt2";
  auto bad_arch = ParseModelConfig(j.dump(), "/m/config.json");
  ASSERT_FALSE(bad_arch.ok());
  EXPECT_EQ(bad_arch.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(bad_arch.status().message().find("/m/config.json"), std::string::npos);
  EXPECT_NE(bad_arch.status().message().find("gpt2"), std::string::npos);

  j = nlohmann::json::parse(kQwen3Config);
  j["torch_dtype"] = "int8";
  auto bad_dtype = ParseModelConfig(j.dump(), "/m/config.json");
  ASSERT_FALSE(bad_dtype.ok());
  EXPECT_NE(bad_dtype.status().message().find("int8"), std::string::npos);

  j = nlohmann::json::parse(kQwen3Config);
  j.erase("hidden_size");
  auto missing = ParseModelConfig(j.dump(), "/m/config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("hidden_size"), std::string::npos);

  j = nlohmann::json::parse(kQwen3Config);
  j["num_key_value_heads"] = 3;
  EXPECT_FALSE(ParseModelConfig(j.dump(), "c").ok());
  EXPECT_FALSE(ParseModelConfig("{not json", "c").ok());
}

TEST(SafetensorsTest, RoundTripsTensors) {
  TempDir tmp;
  const std::string path = tmp.path() + "/t.safetensors";
  std::vector<TensorToWrite> tensors = {
      {"a", kernels::DType::kF32, {2, 3}, std::string(24, '\x01')},
      {"b", kernels::DType::kBF16, {5}, std::string(10, '\x02')},
      {"c", kernels::DType::kF16, {1, 1, 1}, std::string(2, '\x03')}};
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"format", "pt"}}).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ((*file)->tensors().size(), 3u);
  const TensorInfo* b = (*file)->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, kernels::DType::kBF16);
  EXPECT_EQ(b->shape, std::vector<int64_t>{5});
  EXPECT_EQ(std::string(static_cast<const char*>(b->data), 10), std::string(10, '\x02'));
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*file)->Find("a")->data) % 4, 0u);
}

// A safetensors file from a raw header and data bytes.
// The header is padded to 8 bytes, as writers do, so that F32 data is aligned.
std::string RawFile(std::string header, size_t data_bytes) {
  while (header.size() % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

Status ParseRaw(const std::string& bytes) {
  return ParseSafetensorsHeader(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                "x.safetensors")
      .status();
}

TEST(SafetensorsTest, RejectsBadHeaders) {
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_TRUE(ParseRaw(RawFile(ok, 8)).ok());
  Status st = ParseRaw(RawFile(ok, 4));  // data cut short
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("x.safetensors"), std::string::npos);
  EXPECT_NE(st.message().find("'w'"), std::string::npos);
  EXPECT_FALSE(ParseRaw(std::string("\x05\x00", 2)).ok());    // under 8 bytes
  EXPECT_FALSE(ParseRaw(RawFile(ok, 8).substr(0, 20)).ok());  // header cut short
  EXPECT_FALSE(ParseRaw(RawFile("[1,2]", 0)).ok());           // not an object
  EXPECT_FALSE(ParseRaw(RawFile(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8))
                   .ok());  // shape does not match bytes
  EXPECT_FALSE(
      ParseRaw(RawFile(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)).ok());
  EXPECT_FALSE(
      ParseRaw(RawFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)).ok());
  Status i8 = ParseRaw(RawFile(R"({"w":{"dtype":"I8","shape":[8],"data_offsets":[0,8]}})", 8));
  ASSERT_FALSE(i8.ok());
  EXPECT_EQ(i8.code(), StatusCode::kUnsupported);
  EXPECT_NE(i8.message().find("I8"), std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_FALSE(ParseRaw(huge + "{}").ok());
  // Unpadded header: the F32 data would sit at an odd address.
  std::string unaligned = RawFile(ok, 8);
  unaligned.erase(8 + ok.size(), 8 - ok.size() % 8);
  unaligned[0] = static_cast<char>(ok.size());
  if (ok.size() % 4 != 0) {
    EXPECT_FALSE(ParseRaw(unaligned).ok());
  }
}

TEST(ModelInitTest, TinyLoadsWithPresetShapesAndFingerprints) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/tiny";
  ASSERT_TRUE(InitModel("tiny", 7, dir).ok());
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  }
  auto model = Model::Load(dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto preset = PresetConfig("tiny");
  ASSERT_TRUE(preset.ok());
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.architecture, preset->architecture);
  EXPECT_EQ(c.hidden_size, preset->hidden_size);
  EXPECT_EQ(c.num_layers, preset->num_layers);
  EXPECT_EQ(c.eos_token_ids, preset->eos_token_ids);
  const ModelFingerprint& fp = (*model)->fingerprint();
  EXPECT_EQ(fp.weights_sha256, *Sha256File(dir + "/model.safetensors"));
  EXPECT_EQ(fp.config_sha256, Sha256Hex(ReadAll(dir + "/config.json")));
  EXPECT_EQ(fp.tokenizer_sha256, *Sha256File(dir + "/tokenizer.json"));
  EXPECT_EQ(fp.chat_template_sha256.size(), 64u);
  EXPECT_EQ(fp.dtype, "bfloat16");
  // Parameters from the config: tied embeddings, Qwen3 q/k norms, no biases.
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t per_layer =
      2 * H + H * c.num_heads * D * 2 + H * c.num_kv_heads * D * 2 + 3 * H * I + 2 * D;
  EXPECT_EQ(fp.parameter_count, c.vocab_size * H + c.num_layers * per_layer + H);
  EXPECT_EQ((*model)->weights().bytes, fp.parameter_count * 2);
}

TEST(ModelInitTest, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir tmp;
  ASSERT_TRUE(InitModel("tiny", 3, tmp.path() + "/a").ok());
  ASSERT_TRUE(InitModel("tiny", 3, tmp.path() + "/b").ok());
  ASSERT_TRUE(InitModel("tiny", 4, tmp.path() + "/c").ok());
  const std::string a = ReadAll(tmp.path() + "/a/model.safetensors");
  EXPECT_EQ(a, ReadAll(tmp.path() + "/b/model.safetensors"));
  EXPECT_NE(a, ReadAll(tmp.path() + "/c/model.safetensors"));
  EXPECT_FALSE(InitModel("huge", 1, tmp.path() + "/d").ok());
}

TEST(ModelInitTest, ShardedFolderLoadsTheSameTensors) {
  TempDir tmp;
  ASSERT_TRUE(InitModel("tiny", 5, tmp.path() + "/one", 1).ok());
  ASSERT_TRUE(InitModel("tiny", 5, tmp.path() + "/three", 3).ok());
  EXPECT_TRUE(fs::exists(tmp.path() + "/three/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(tmp.path() + "/three/model-00003-of-00003.safetensors"));
  auto one = Model::Load(tmp.path() + "/one");
  auto three = Model::Load(tmp.path() + "/three");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ((*one)->fingerprint().parameter_count, (*three)->fingerprint().parameter_count);
  const auto& w1 = (*one)->weights();
  const auto& w3 = (*three)->weights();
  for (size_t l = 0; l < w1.layers.size(); ++l) {
    const auto& a = w1.layers[l].down_proj;
    const auto& b = w3.layers[l].down_proj;
    EXPECT_EQ(std::memcmp(a.data, b.data, a.rows * a.cols * 2), 0) << "layer " << l;
  }
  // A shard named by the index but absent is an error naming it.
  fs::remove(tmp.path() + "/three/model-00002-of-00003.safetensors");
  auto broken = Model::Load(tmp.path() + "/three");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("model-00002-of-00003.safetensors"), std::string::npos);
}

class BrokenModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path() + "/m";
    ASSERT_TRUE(InitModel("tiny", 1, dir_).ok());
  }
  std::string Error() {
    auto model = Model::Load(dir_, false);
    EXPECT_FALSE(model.ok());
    return model.ok() ? "" : model.status().message();
  }
  void EditConfig(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(ReadAll(dir_ + "/config.json"));
    edit(j);
    WriteAll(dir_ + "/config.json", j.dump());
  }
  TempDir tmp_;
  std::string dir_;
};

TEST_F(BrokenModelTest, TruncatedFile) {
  const std::string path = dir_ + "/model.safetensors";
  std::string bytes = ReadAll(path);
  WriteAll(path, bytes.substr(0, bytes.size() / 2));
  std::string err = Error();
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

TEST_F(BrokenModelTest, MissingTensor) {
  EditConfig([](nlohmann::json& j) { j["num_hidden_layers"] = 3; });
  std::string err = Error();
  EXPECT_NE(err.find("model.layers.2.input_layernorm.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
}

TEST_F(BrokenModelTest, WrongShape) {
  EditConfig([](nlohmann::json& j) { j["intermediate_size"] = 100; });
  std::string err = Error();
  EXPECT_NE(err.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("[128, 64]"), std::string::npos) << err;
}

TEST_F(BrokenModelTest, UnknownArchitectureAndDtype) {
  EditConfig([](nlohmann::json& j) { j["model_type"] = "mamba"; });
  std::string err = Error();
  EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  EXPECT_NE(err.find("mamba"), std::string::npos) << err;
  EditConfig([](nlohmann::json& j) {
    j["model_type"] = "qwen3";
    j["torch_dtype"] = "float8_e4m3fn";
  });
  err = Error();
  EXPECT_NE(err.find("float8_e4m3fn"), std::string::npos) << err;
}

TEST_F(BrokenModelTest, MissingWeightsAndConfig) {
  fs::remove(dir_ + "/model.safetensors");
  EXPECT_NE(Error().find("model.safetensors"), std::string::npos);
  fs::remove(dir_ + "/config.json");
  EXPECT_NE(Error().find("config.json"), std::string::npos);
}

TEST(BundledTokenizerTest, FoundInSourceTreeOrNamesSetup) {
  auto dir = BundledTokenizerDir();
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_TRUE(fs::exists(*dir + "/tokenizer.json"));
  setenv("TRACE_TOKENIZER_DIR", "/nonexistent-trace-dir", 1);
  auto missing = BundledTokenizerDir();
  unsetenv("TRACE_TOKENIZER_DIR");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("scripts/setup.sh"), std::string::npos);
}

TEST(DemoModelTest, DefaultDirFollowsXdg) {
  TempDir tmp;
  setenv("XDG_DATA_HOME", tmp.path().c_str(), 1);
  EXPECT_EQ(DefaultDemoModelDir(), tmp.path() + "/trace/models/demo-tiny");
  auto dir = EnsureDemoModel();
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_TRUE(Model::Load(*dir, false).ok());
  auto again = EnsureDemoModel();  // already there: reused
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *dir);
  unsetenv("XDG_DATA_HOME");
}

}  // namespace
}  // namespace trace::engine
