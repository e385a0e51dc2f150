// The architectures beyond Qwen (docs/models.md): Gemma 3 (gemma3-tiny: GeGLU, (1 + w)
// sandwich norms and q/k norms, embeddings scaled by sqrt(hidden), query_pre_attn_scalar, a
// local layer with a window of 8 and its own RoPE base, then a global one), Gemma 3 with final
// logit soft-capping and linear RoPE scaling, Llama 3 (its RoPE scaling), Mistral and Mixtral
// with a sliding window. For each, over 40 tokens (five windows): bitwise invariance to
// chunking, batch companions, threads, every CPU ISA path and a forked prefix, and the logits
// at every position within 1e-4 relative L2 of the float64 reference (reference_forward.h).
#include <functional>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/model_init.h"
#include "engine/safetensors.h"
#include "engine_test_util.h"
#include "reference_forward.h"

namespace trace::engine {
namespace {

using kernels::Impl;
using kernels::Numerics;
using testing::AllLogits;
using testing::Bits;
using testing::EngineOrDie;
using testing::RandomTokens;

constexpr size_t kTokens = 40;

struct Case {
  const char* name;
  const char* preset;
  std::function<void(ModelConfig*)> change;  // applied to the preset's config
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

const Case kCases[] = {
    {"gemma3_tiny", "gemma3-tiny", [](ModelConfig*) {}},
    {"gemma3_softcap_linear_rope", "gemma3-tiny",
     [](ModelConfig* c) {
       c->final_logit_softcap = 0.75f;  // below the random model's logits: the cap bends them
       c->rope_scaling.type = kernels::RopeScaling::Type::kLinear;
       c->rope_scaling.factor = 8.0;
       c->sliding_window = 5;
       c->num_layers = 3;
       c->sliding_layers = {1, 0, 1};
     }},
    {"llama3_tiny", "llama3-tiny", [](ModelConfig*) {}},
    {"mistral_window", "mistral-tiny", [](ModelConfig* c) { c->sliding_window = 6; }},
    {"mixtral_window", "mixtral-tiny", [](ModelConfig* c) { c->sliding_window = 7; }},
};

class ArchitectureTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto config = PresetConfig(GetParam().preset);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    GetParam().change(&*config);
    config_ = *config;
    ASSERT_TRUE(InitModelFromConfig(config_, 13, tmp_.path() + "/m", 1, GetParam().preset).ok());
    model_ = testing::LoadOrDie(tmp_.path() + "/m");
    ASSERT_NE(model_, nullptr);
    std::mt19937_64 rng(21);
    tokens_ = RandomTokens(&rng, kTokens, static_cast<int32_t>(config_.vocab_size));
  }
  size_t vocab() const { return static_cast<size_t>(config_.vocab_size); }

  testing::TempDir tmp_;
  ModelConfig config_;
  std::shared_ptr<const Model> model_;
  std::vector<int32_t> tokens_;
};

TEST_P(ArchitectureTest, ConfigRoundTripsThroughConfigJson) {
  // What the loader read back from the config.json InitModel wrote is what was asked for.
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.architecture, config_.architecture);
  EXPECT_EQ(c.sliding_window, config_.sliding_window);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    EXPECT_EQ(c.IsSlidingLayer(l), config_.IsSlidingLayer(l)) << "layer " << l;
  }
  EXPECT_EQ(c.attention_scale_dim, config_.attention_scale_dim);
  EXPECT_EQ(c.final_logit_softcap, config_.final_logit_softcap);
  EXPECT_EQ(c.rope_scaling.type, config_.rope_scaling.type);
  EXPECT_EQ(c.embedding_scale, config_.embedding_scale);
  EXPECT_EQ(c.hidden_activation, config_.hidden_activation);
}

TEST_P(ArchitectureTest, BitwiseInvariantToChunksBatchesThreadsAndIsaPaths) {
  auto engine = EngineOrDie(model_, Numerics::kCanonical, Impl::kAuto, 2);
  const auto one_pass = AllLogits(engine.get(), tokens_, 0);
  ASSERT_EQ(one_pass.size(), kTokens * vocab());
  for (size_t chunk : {1, 3, 16}) {  // 1: token-by-token decode
    EXPECT_EQ(Bits(AllLogits(engine.get(), tokens_, chunk)), Bits(one_pass)) << "chunk " << chunk;
  }
  for (int threads : {1, 3}) {
    auto other = EngineOrDie(model_, Numerics::kCanonical, Impl::kAuto, threads);
    EXPECT_EQ(Bits(AllLogits(other.get(), tokens_, 7)), Bits(one_pass)) << threads << " threads";
  }
  for (Impl impl : kernels::AvailableCpuIsaPaths()) {
    auto forced = EngineOrDie(model_, Numerics::kCanonical, impl, 2);
    EXPECT_EQ(Bits(AllLogits(forced.get(), tokens_, 0)), Bits(one_pass))
        << kernels::CpuIsaPathName(impl);
  }

  // Batched with two companions of other lengths, the target fed in chunks of 9, then a fork
  // of its first 25 tokens continued: the same last-position logits.
  std::mt19937_64 rng(4);
  const SeqId target = engine->NewSequence();
  std::vector<SeqId> companions = {engine->NewSequence(), engine->NewSequence()};
  ForwardOutput out;
  std::vector<float> last;
  for (size_t begin = 0; begin < kTokens; begin += 9) {
    const size_t n = std::min<size_t>(9, kTokens - begin);
    const auto a = RandomTokens(&rng, 1 + rng() % 11, static_cast<int32_t>(vocab()));
    const auto b = RandomTokens(&rng, 1 + rng() % 11, static_cast<int32_t>(vocab()));
    std::vector<BatchItem> items = {{companions[0], a, {0}},
                                    {target,
                                     std::span<const int32_t>(tokens_.data() + begin, n),
                                     {static_cast<int32_t>(n - 1)}},
                                    {companions[1], b, {static_cast<int32_t>(b.size() - 1)}}};
    ASSERT_TRUE(engine->Forward(items, &out).ok());
    last.assign(out.row(1).begin(), out.row(1).end());
  }
  const std::vector<float> want(one_pass.end() - vocab(), one_pass.end());
  EXPECT_EQ(Bits(last), Bits(want)) << "batched";
  auto fork = engine->ForkSequence(target, 25);
  ASSERT_TRUE(fork.ok());
  std::vector<BatchItem> rest = {{*fork,
                                  std::span<const int32_t>(tokens_.data() + 25, kTokens - 25),
                                  {static_cast<int32_t>(kTokens - 26)}}};
  ASSERT_TRUE(engine->Forward(rest, &out).ok());
  EXPECT_EQ(Bits(out.row(0)), Bits(want)) << "forked prefix";
}

TEST_P(ArchitectureTest, AccurateAgainstFloat64ReferenceAtEveryPosition) {
  auto engine = EngineOrDie(model_, Numerics::kCanonical, Impl::kAuto, 2);
  const auto logits = AllLogits(engine.get(), tokens_, 0);
  testing::ReferenceForward reference(*model_);
  double worst = 0;
  for (size_t t = 0; t < kTokens; ++t) {
    const std::vector<double> want = reference.Step(tokens_[t]);
    const double rel = testing::RelativeL2({logits.data() + t * vocab(), vocab()}, want);
    EXPECT_LT(rel, 1e-4) << "position " << t;
    worst = std::max(worst, rel);
  }
  std::printf("%s: relative L2 vs float64, worst over %zu positions: %.3g\n", GetParam().name,
              kTokens, worst);
}

INSTANTIATE_TEST_SUITE_P(Architectures, ArchitectureTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A Gemma 3 checkpoint with a vision tower (model_type gemma3, as gemma-3-4b and larger ship):
// the sparse text_config over Gemma3TextConfig's defaults, the language model's tensors under
// either prefix transformers has written, the vision tower's ignored. Bitwise the same model as
// the gemma3_text folder it was made from.
TEST(Gemma3Multimodal, TextModelOfAVisionCheckpointIsTheTextModel) {
  testing::TempDir tmp;
  const std::string text_dir = tmp.path() + "/text";
  ASSERT_TRUE(InitModel("gemma3-tiny", 19, text_dir).ok());
  auto text = testing::LoadOrDie(text_dir);
  ASSERT_NE(text, nullptr);
  const nlohmann::json tc = nlohmann::json::parse(testing::ReadAll(text_dir + "/config.json"));
  nlohmann::json config = {
      {"architectures", {"Gemma3ForConditionalGeneration"}},
      {"model_type", "gemma3"},
      {"eos_token_id", tc["eos_token_id"]},
      {"torch_dtype", "bfloat16"},
      {"image_token_index", 262144},
      {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 16}}}};
  // What the published configs spell out; the rest (rope_theta, rms_norm_eps, ...) is
  // Gemma3TextConfig's default, which gemma3-tiny shares.
  for (const char* key :
       {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "query_pre_attn_scalar", "sliding_window", "layer_types",
        "vocab_size", "max_position_embeddings"}) {
    config["text_config"][key] = tc[key];
  }
  std::mt19937_64 rng(6);
  const auto tokens = RandomTokens(&rng, 20, static_cast<int32_t>(text->config().vocab_size));
  auto want_engine = EngineOrDie(text, Numerics::kCanonical, Impl::kAuto, 2);
  const auto want = AllLogits(want_engine.get(), tokens, 0);
  auto file = SafetensorsFile::Open(text_dir + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    const std::string dir = tmp.path() + "/" + prefix;
    std::filesystem::create_directories(dir);
    testing::WriteAll(dir + "/config.json", config.dump(2));
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
      std::filesystem::copy_file(text_dir + "/" + f, dir + "/" + f);
    }
    std::vector<TensorToWrite> tensors;
    for (const auto& [name, info] : (*file)->tensors()) {
      TensorToWrite t{prefix + name.substr(std::string("model.").size()), info.dtype, info.shape,
                      std::string(static_cast<const char*>(info.data), info.end - info.begin)};
      tensors.push_back(std::move(t));
    }
    tensors.push_back({"vision_tower.vision_model.post_layernorm.weight",
                       kernels::DType::kBF16,
                       {16},
                       std::string(32, '\1')});
    ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors).ok());
    auto wrapped = testing::LoadOrDie(dir);
    ASSERT_NE(wrapped, nullptr) << prefix;
    EXPECT_EQ(wrapped->config().architecture, "gemma3_text");
    EXPECT_TRUE(wrapped->config().multimodal_wrapper);
    auto engine = EngineOrDie(wrapped, Numerics::kCanonical, Impl::kAuto, 2);
    EXPECT_EQ(Bits(AllLogits(engine.get(), tokens, 0)), Bits(want)) << prefix;
  }
}

// The window is real: with it, a sliding model's logits equal the same weights' without it
// up to position window - 1, and differ after (the first position that lost a key).
TEST(SlidingWindowTest, ChangesExactlyThePositionsPastTheWindow) {
  testing::TempDir tmp;
  auto config = PresetConfig("mistral-tiny");
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(InitModelFromConfig(*config, 3, tmp.path() + "/full", 1, "mistral-tiny").ok());
  config->sliding_window = 6;
  ASSERT_TRUE(InitModelFromConfig(*config, 3, tmp.path() + "/window", 1, "mistral-tiny").ok());
  std::mt19937_64 rng(8);
  const auto tokens = RandomTokens(&rng, 12, static_cast<int32_t>(config->vocab_size));
  auto full =
      EngineOrDie(testing::LoadOrDie(tmp.path() + "/full"), Numerics::kCanonical, Impl::kAuto, 2);
  auto window =
      EngineOrDie(testing::LoadOrDie(tmp.path() + "/window"), Numerics::kCanonical, Impl::kAuto, 2);
  const auto a = AllLogits(full.get(), tokens, 0), b = AllLogits(window.get(), tokens, 0);
  const size_t V = static_cast<size_t>(config->vocab_size);
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::span<const float> ra(a.data() + t * V, V), rb(b.data() + t * V, V);
    if (t < 6) {
      EXPECT_EQ(Bits(ra), Bits(rb)) << "position " << t << " sees no more than the window";
    } else {
      EXPECT_NE(Bits(ra), Bits(rb)) << "position " << t << " lost keys to the window";
    }
  }
}

}  // namespace
}  // namespace trace::engine
