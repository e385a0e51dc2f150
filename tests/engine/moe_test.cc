// Mixture-of-experts models (qwen3_moe, mixtral): config parsing and load errors, the routing
// and combine kernels against the contract, bitwise batch invariance of canonical routing
// (companions, chunking, threads, kernel implementation), accuracy against the float64
// reference, and fast numerics' capacity-limited routing moving with the batch.
#include <cmath>
#include <filesystem>
#include <numeric>

#include "base/hash.h"
#include "engine/model_config.h"
#include "engine/safetensors.h"
#include "engine_test_util.h"
#include "kernels/canonical.h"
#include "kernels/thread_pool.h"
#include "reference_forward.h"

namespace trace::engine {
namespace {

using kernels::Impl;
using kernels::Numerics;
using testing::AllLogits;
using testing::Bits;
using testing::EngineOrDie;
using testing::RandomTokens;

// ---- the routing kernels -------------------------------------------------------------------

struct Route {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Route RouteOf(const std::vector<float>& logits, int64_t M, int64_t E, int64_t k, bool normalize,
              Numerics numerics = Numerics::kCanonical, kernels::ThreadPool* pool = nullptr) {
  kernels::KernelContext ctx;
  ctx.numerics = numerics;
  ctx.pool = pool;
  Route r{std::vector<int32_t>(M * k), std::vector<float>(M * k)};
  kernels::MoeRoute(ctx, logits.data(), M, E, k, normalize, r.ids.data(), r.weights.data());
  return r;
}

TEST(KernelsMoe, TopKRanksByProbabilityThenLowerId) {
  // Experts 1, 2 and 4 tie on the largest logit: the lower ids win, listed ascending.
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f, 3.0f, -2.0f};
  Route two = RouteOf(logits, 1, 6, 2, /*normalize=*/true);
  EXPECT_EQ(two.ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(two.weights[0], 0.5f);
  EXPECT_EQ(two.weights[1], 0.5f);
  Route four = RouteOf(logits, 1, 6, 4, /*normalize=*/false);
  EXPECT_EQ(four.ids, (std::vector<int32_t>{0, 1, 2, 4}));
  // Unnormalised weights are the softmax probabilities themselves.
  float p[6], sum_check = 0;
  for (int e = 0; e < 6; ++e) sum_check += static_cast<float>(std::exp(logits[e] - 3.0));
  for (int e = 0; e < 6; ++e) p[e] = static_cast<float>(std::exp(logits[e] - 3.0)) / sum_check;
  EXPECT_NEAR(four.weights[0], p[0], 1e-6);
  EXPECT_NEAR(four.weights[3], p[4], 1e-6);
  // A NaN logit makes every probability NaN; the route is still k distinct ids, ascending.
  std::vector<float> nan_logits = logits;
  nan_logits[3] = std::nanf("");
  Route nan_route = RouteOf(nan_logits, 1, 6, 3, true);
  EXPECT_EQ(nan_route.ids, (std::vector<int32_t>{0, 1, 2}));
}

TEST(KernelsMoe, RouteAgreesWithFloat64Softmax) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int64_t M = 200, E = 128, k = 8;
  std::vector<float> logits(M * E);
  for (float& v : logits) v = normal(rng);
  Route r = RouteOf(logits, M, E, k, true);
  int checked = 0;
  for (int64_t m = 0; m < M; ++m) {
    std::vector<double> p(E);
    double mx = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, double{logits[m * E + e]});
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(logits[m * E + e] - mx));
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    // Only rows whose k-th and (k+1)-th probabilities are clearly apart have one right answer.
    if (p[order[k - 1]] - p[order[k]] < 1e-5 * sum) continue;
    ++checked;
    std::vector<int32_t> want(order.begin(), order.begin() + k);
    std::sort(want.begin(), want.end());
    ASSERT_EQ(std::vector<int32_t>(r.ids.begin() + m * k, r.ids.begin() + (m + 1) * k), want);
    double chosen = 0;
    for (int32_t e : want) chosen += p[e];
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_NEAR(r.weights[m * k + j], p[want[j]] / chosen, 2e-6) << "row " << m;
    }
  }
  EXPECT_GT(checked, 150);
}

TEST(KernelsMoe, CanonicalRouteOfARowIgnoresTheBatchAndThreads) {
  std::mt19937_64 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t M = 97, E = 8, k = 2;
  std::vector<float> logits(M * E);
  for (float& v : logits) v = normal(rng);
  auto pool = kernels::ThreadPool::Create(3);
  Route batch = RouteOf(logits, M, E, k, true, Numerics::kCanonical, pool.get());
  for (int64_t m = 0; m < M; ++m) {
    std::vector<float> one(logits.begin() + m * E, logits.begin() + (m + 1) * E);
    Route alone = RouteOf(one, 1, E, k, true);
    for (int64_t j = 0; j < k; ++j) {
      ASSERT_EQ(alone.ids[j], batch.ids[m * k + j]);
      ASSERT_EQ(Bits(std::span<const float>(&alone.weights[j], 1)),
                Bits(std::span<const float>(&batch.weights[m * k + j], 1)));
    }
  }
}

TEST(KernelsMoe, FastCapacityDropsDependOnTheBatch) {
  // Every row prefers expert 0, then expert 1: capacity ceil(M * k / E) lets the first rows
  // keep expert 0 and drops it for the later ones; a row alone keeps both experts.
  const int64_t M = 16, E = 8, k = 2;
  std::vector<float> logits(M * E, 0.0f);
  for (int64_t m = 0; m < M; ++m) {
    logits[m * E + 0] = 4.0f;
    logits[m * E + 1] = 3.0f;
  }
  Route fast = RouteOf(logits, M, E, k, true, Numerics::kFast);
  const int64_t capacity = (M * k + E - 1) / E;
  int kept0 = 0;
  for (int64_t m = 0; m < M; ++m) {
    const bool kept = fast.ids[m * k] == 0;
    EXPECT_EQ(kept, m < capacity) << "row " << m;
    kept0 += kept;
    if (!kept) {
      EXPECT_EQ(fast.ids[m * k], -1);
      EXPECT_EQ(fast.weights[m * k], 0.0f);
    }
  }
  EXPECT_EQ(kept0, capacity);
  Route alone =
      RouteOf(std::vector<float>(logits.end() - E, logits.end()), 1, E, k, true, Numerics::kFast);
  EXPECT_EQ(alone.ids, (std::vector<int32_t>{0, 1}));
  Route canonical = RouteOf(logits, M, E, k, true);
  for (int64_t m = 0; m < M; ++m) EXPECT_EQ(canonical.ids[m * k], 0);
}

TEST(KernelsMoe, CombineSumsInAscendingIdOrderAndSkipsDropped) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t M = 5, k = 3, n = 67;
  std::vector<float> expert_out(M * k * n), weights(M * k);
  std::vector<int32_t> ids = {0, 3, 5, 1, 2, 7, -1, 4, 6, 2, -1, 3, 0, 1, 2};
  for (float& v : expert_out) v = u(rng);
  for (float& v : weights) v = u(rng);
  std::vector<float> out(M * n);
  auto pool = kernels::ThreadPool::Create(2);
  kernels::KernelContext ctx;
  ctx.pool = pool.get();
  kernels::MoeCombine(ctx, expert_out.data(), ids.data(), weights.data(), M, k, n, out.data());
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        if (ids[m * k + j] < 0) continue;
        const float prod = weights[m * k + j] * expert_out[(m * k + j) * n + i];
        acc = acc + prod;
      }
      ASSERT_EQ(Bits(std::span<const float>(&acc, 1)),
                Bits(std::span<const float>(&out[m * n + i], 1)))
          << m << ", " << i;
    }
  }
}

// ---- config and loading --------------------------------------------------------------------

TEST(MoeConfig, ParsesQwen3MoeAndMixtralFields) {
  const std::string qwen = R"({"model_type": "qwen3_moe", "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "num_experts": 16, "num_experts_per_tok": 4,
    "moe_intermediate_size": 32, "norm_topk_prob": true, "decoder_sparse_step": 2,
    "mlp_only_layers": [3]})";
  auto c = ParseModelConfig(qwen, "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_experts, 16);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_TRUE(c->qk_norm);
  // step 2: layers 1 and 3 are sparse, but 3 is in mlp_only_layers.
  EXPECT_FALSE(c->IsMoeLayer(0));
  EXPECT_TRUE(c->IsMoeLayer(1));
  EXPECT_FALSE(c->IsMoeLayer(2));
  EXPECT_FALSE(c->IsMoeLayer(3));

  const std::string mixtral = R"({"model_type": "mixtral", "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "num_local_experts": 8, "num_experts_per_tok": 2,
    "sliding_window": null})";
  auto m = ParseModelConfig(mixtral, "/m/config.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->num_experts, 8);
  EXPECT_EQ(m->moe_intermediate_size, 96);
  EXPECT_TRUE(m->norm_topk_prob);
  EXPECT_FALSE(m->qk_norm);
  EXPECT_TRUE(m->IsMoeLayer(0) && m->IsMoeLayer(1));

  // Every preset's config.json reads back to the same MoE shape.
  for (const std::string preset :
       {"qwen3-moe-tiny", "qwen3-moe-a3b-narrow", "mixtral-tiny", "qwen2-moe-tiny"}) {
    auto p = PresetConfig(preset);
    ASSERT_TRUE(p.ok());
    auto back = ParseModelConfig(ModelConfigToJson(*p), "config.json");
    ASSERT_TRUE(back.ok()) << preset << ": " << back.status().ToString();
    EXPECT_EQ(back->architecture, p->architecture);
    EXPECT_EQ(back->num_experts, p->num_experts);
    EXPECT_EQ(back->num_experts_per_tok, p->num_experts_per_tok);
    EXPECT_EQ(back->moe_intermediate_size, p->moe_intermediate_size);
    EXPECT_EQ(back->norm_topk_prob, p->norm_topk_prob);
    EXPECT_EQ(back->shared_expert_intermediate_size, p->shared_expert_intermediate_size);
    EXPECT_EQ(back->attention_bias, p->attention_bias);
    EXPECT_EQ(back->qk_norm, p->qk_norm);
  }
  auto a3b = PresetConfig("qwen3-moe-a3b-narrow");
  EXPECT_EQ(a3b->num_experts, 128);
  EXPECT_EQ(a3b->num_experts_per_tok, 8);
}

// qwen2_moe with Qwen2MoeConfig's defaults: 60 experts, top 4, width 1408, a shared expert of
// 5632, unnormalised top-k, every layer sparse, q/k/v biases (qkv_bias), no q/k norm.
TEST(MoeConfig, ParsesQwen2MoeWithHuggingFaceDefaults) {
  const std::string base = R"("model_type": "qwen2_moe", "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4)";
  auto c = ParseModelConfig("{" + base + "}", "/m/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_experts, 60);
  EXPECT_EQ(c->num_experts_per_tok, 4);
  EXPECT_EQ(c->moe_intermediate_size, 1408);
  EXPECT_EQ(c->shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_TRUE(c->IsMoeLayer(0) && c->IsMoeLayer(1));
  auto d = ParseModelConfig("{" + base + R"(, "num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 96, "norm_topk_prob": true,
    "qkv_bias": false, "mlp_only_layers": [0]})",
                            "/m/config.json");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->num_experts, 8);
  EXPECT_EQ(d->shared_expert_intermediate_size, 96);
  EXPECT_TRUE(d->norm_topk_prob);
  EXPECT_FALSE(d->attention_bias);
  EXPECT_FALSE(d->IsMoeLayer(0));
  EXPECT_TRUE(d->IsMoeLayer(1));
}

// The shared expert's term: added after the routed sum as one more CombineStep with weight
// 1 / (1 + Exp(-gate logit)); within float rounding of the float64 value.
TEST(KernelsMoe, SharedExpertTermIsAddedWithSigmoidWeight) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const int64_t M = 7, n = 45;
  std::vector<float> shared(M * n), gate(M), out(M * n);
  for (float& v : shared) v = u(rng);
  for (float& v : gate) v = u(rng);
  for (float& v : out) v = u(rng);
  const std::vector<float> routed = out;
  auto pool = kernels::ThreadPool::Create(2);
  kernels::KernelContext ctx;
  ctx.pool = pool.get();
  kernels::MoeAddShared(ctx, shared.data(), gate.data(), M, n, out.data());
  for (int64_t m = 0; m < M; ++m) {
    const float w = kernels::canonical::SharedExpertWeight(gate[m]);
    EXPECT_NEAR(w, 1.0 / (1.0 + std::exp(-static_cast<double>(gate[m]))), 1e-6);
    for (int64_t i = 0; i < n; ++i) {
      const float want = routed[m * n + i] + w * shared[m * n + i];  // rounded mul, then add
      ASSERT_EQ(Bits(std::span<const float>(&want, 1)),
                Bits(std::span<const float>(&out[m * n + i], 1)))
          << m << ", " << i;
    }
  }
}

TEST(MoeConfig, BadFieldsAreOneLineErrorsNamingTheField) {
  const std::string base = R"("model_type": "qwen3_moe", "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "moe_intermediate_size": 32)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("num_experts_per_tok": 2)", "field 'num_experts' is missing"},
      {R"("num_experts": 8, "num_experts_per_tok": 9)", "field 'num_experts_per_tok' is 9"},
      {R"("num_experts": 8, "num_experts_per_tok": 0)", "field 'num_experts_per_tok' is 0"},
      {R"("num_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [2])",
       "field 'mlp_only_layers' holds 2"},
      {R"("num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 0)",
       "field 'decoder_sparse_step' must be positive"},
      {R"("num_experts": 8, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 64)",
       "field 'shared_expert_intermediate_size'"},
  };
  for (const auto& [fields, want] : cases) {
    auto c = ParseModelConfig("{" + base + ", " + fields + "}", "/m/config.json");
    ASSERT_FALSE(c.ok()) << fields;
    EXPECT_NE(c.status().ToString().find("/m/config.json: " + want), std::string::npos)
        << c.status().ToString();
    EXPECT_EQ(c.status().ToString().find('\n'), std::string::npos);
  }
  // Mixtral's sliding window: every layer slides (engine_architectures_test runs one).
  auto sw = ParseModelConfig(R"({"model_type": "mixtral", "vocab_size": 100, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
    "sliding_window": 1024})",
                             "/m/config.json");
  ASSERT_TRUE(sw.ok()) << sw.status().ToString();
  EXPECT_EQ(sw->sliding_window, 1024);
  EXPECT_TRUE(sw->IsSlidingLayer(0) && sw->IsSlidingLayer(1));
}

// Rewrites `dir`/model.safetensors without tensor `drop` and with `reshape` given `shape`.
void RewriteWeights(const std::string& dir, const std::string& drop, const std::string& reshape,
                    std::vector<int64_t> shape) {
  std::vector<TensorToWrite> tensors;
  {
    auto file = SafetensorsFile::Open(dir + "/model.safetensors");
    ASSERT_TRUE(file.ok());
    for (const auto& [name, info] : (*file)->tensors()) {
      if (name == drop) continue;
      TensorToWrite t{name, info.dtype, info.shape,
                      std::string(static_cast<const char*>(info.data), info.end - info.begin)};
      if (name == reshape) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        t.shape = shape;
        t.bytes.assign(static_cast<size_t>(n) * 2, '\0');
      }
      tensors.push_back(std::move(t));
    }
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors).ok());
}

TEST(MoeLoad, MissingOrMisshapedExpertTensorsNameTheTensor) {
  testing::TempDir tmp;
  for (const auto& [preset, drop, want] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"qwen3-moe-tiny", "model.layers.1.mlp.experts.5.up_proj.weight", ""},
           {"mixtral-tiny", "model.layers.0.block_sparse_moe.experts.7.w2.weight", ""},
           {"qwen2-moe-tiny", "model.layers.1.mlp.shared_expert.down_proj.weight", ""},
           {"qwen2-moe-tiny", "model.layers.0.mlp.shared_expert_gate.weight", ""}}) {
    const std::string dir = tmp.path() + "/" + preset;
    ASSERT_TRUE(InitModel(preset, 3, dir).ok());
    ASSERT_TRUE(Model::Load(dir, false).ok()) << preset;
    RewriteWeights(dir, drop, "", {});
    auto missing = Model::Load(dir, false);
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().ToString().find('\n'), std::string::npos);
    EXPECT_NE(missing.status().ToString().find(dir + "/model.safetensors: tensor '" + drop +
                                               "' is missing"),
              std::string::npos)
        << missing.status().ToString();
  }
  const std::string dir = tmp.path() + "/router";
  ASSERT_TRUE(InitModel("qwen3-moe-tiny", 3, dir).ok());
  RewriteWeights(dir, "", "model.layers.0.mlp.gate.weight", {7, 64});
  auto bad = Model::Load(dir, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("tensor 'model.layers.0.mlp.gate.weight' has shape "
                                         "[7, 64], the config needs [8, 64]"),
            std::string::npos)
      << bad.status().ToString();
}

// MoE models run on the CUDA engine too (engine/cuda, kernels/cuda/moe.cu): Engine::Create
// no longer refuses them; without a device the error is the device's, not the model's.
TEST(MoeLoad, CudaDeviceTakesMoeModels) {
  testing::TempDir tmp;
  ASSERT_TRUE(InitModel("qwen2-moe-tiny", 3, tmp.path() + "/m").ok());
  auto model = testing::LoadOrDie(tmp.path() + "/m");
  EngineOptions options;
  options.device = "cuda";
  auto engine = Engine::Create(model, options);
  if (!engine.ok()) {
    EXPECT_EQ(engine.status().ToString().find("mixture-of-experts"), std::string::npos)
        << engine.status().ToString();
    EXPECT_EQ(engine.status().ToString().find("CPU engine only"), std::string::npos);
  }
}

// ---- the forward pass ----------------------------------------------------------------------

// The target's logits (every position) when it runs in one Forward call with `others`
// companions of random lengths, some of them mid-sequence, the target placed last.
std::vector<float> WithCompanions(Engine* engine, const std::vector<int32_t>& target, int others,
                                  std::mt19937_64* rng, int32_t vocab) {
  std::vector<std::vector<int32_t>> contents;
  std::vector<SeqId> seqs;
  std::uniform_int_distribution<int> len(1, 40);
  for (int i = 0; i < others; ++i) {
    contents.push_back(RandomTokens(rng, len(*rng), vocab));
    seqs.push_back(engine->NewSequence());
    if (i % 3 == 0) {
      auto prefix = RandomTokens(rng, len(*rng), vocab);
      BatchItem item{seqs.back(), prefix, {}};
      ForwardOutput out;
      EXPECT_TRUE(engine->Forward(std::span<const BatchItem>(&item, 1), &out).ok());
    }
  }
  const SeqId target_seq = engine->NewSequence();
  std::vector<BatchItem> items;
  size_t row = 0;
  for (int i = 0; i < others; ++i) {
    items.push_back({seqs[i], contents[i], {static_cast<int32_t>(contents[i].size() - 1)}});
    ++row;
  }
  items.push_back({target_seq, target, {}});
  for (size_t i = 0; i < target.size(); ++i) items.back().logits_at.push_back(i);
  ForwardOutput out;
  EXPECT_TRUE(engine->Forward(items, &out).ok());
  for (SeqId s : seqs) engine->FreeSequence(s);
  engine->FreeSequence(target_seq);
  return std::vector<float>(out.logits.begin() + row * vocab,
                            out.logits.begin() + (row + target.size()) * vocab);
}

// A model per preset (and one custom mixed dense/MoE config), written once per process.
class MoeModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  static std::shared_ptr<const Model> Get(const std::string& name) {
    static testing::TempDir tmp_dir;  // removed at exit, after `models` below
    static testing::TempDir* tmp = &tmp_dir;
    static std::map<std::string, std::shared_ptr<const Model>> models;
    auto it = models.find(name);
    if (it != models.end()) return it->second;
    const std::string dir = tmp->path() + "/" + name;
    if (name == "mixed") {
      // Dense and sparse layers in one model, top-k without renormalisation.
      auto c = PresetConfig("qwen3-moe-tiny");
      EXPECT_TRUE(c.ok());
      c->num_layers = 3;
      c->mlp_only_layers = {1};
      c->norm_topk_prob = false;
      c->num_experts_per_tok = 3;
      EXPECT_TRUE(InitModelFromConfig(*c, 5, dir, 1, "mixed").ok());
    } else {
      EXPECT_TRUE(InitModel(name, 5, dir).ok());
    }
    return models[name] = testing::LoadOrDie(dir);
  }
  std::shared_ptr<const Model> model() { return Get(GetParam()); }
  int32_t vocab() { return static_cast<int32_t>(model()->config().vocab_size); }
};

TEST_P(MoeModelTest, ChunkingDoesNotChangeAnyBit) {
  std::mt19937_64 rng(1);
  const auto tokens = RandomTokens(&rng, 24, vocab());
  auto engine = EngineOrDie(model(), Numerics::kCanonical, Impl::kAuto, 2);
  const auto one_pass = AllLogits(engine.get(), tokens, 0);
  for (size_t chunk : {1, 7}) {  // chunk 1 is token-by-token decode
    EXPECT_EQ(Bits(AllLogits(engine.get(), tokens, chunk)), Bits(one_pass)) << "chunk " << chunk;
  }
}

TEST_P(MoeModelTest, BatchCompanionsDoNotChangeAnyBit) {
  std::mt19937_64 rng(2);
  const auto target = RandomTokens(&rng, 12, vocab());
  auto engine = EngineOrDie(model(), Numerics::kCanonical, Impl::kAuto, 2);
  const auto alone = AllLogits(engine.get(), target, 0);
  for (int others : {1, 5, 31}) {
    EXPECT_EQ(Bits(WithCompanions(engine.get(), target, others, &rng, vocab())), Bits(alone))
        << others << " companions";
  }
}

// Every position's route through the RouteProbe: [position] -> (layer, experts) per MoE
// layer. `others` companions (random lengths, some mid-sequence) share each Forward call;
// the prompt goes in chunks of `chunk` tokens (0: one chunk).
using Routes = std::vector<std::vector<std::pair<int, std::vector<int32_t>>>>;
Routes RoutesOf(Engine* engine, const std::vector<int32_t>& tokens, size_t chunk, int others,
                std::mt19937_64* rng, int32_t vocab) {
  Routes routes(tokens.size());
  const SeqId seq = engine->NewSequence();
  std::vector<SeqId> companions;
  std::uniform_int_distribution<int> len(1, 30);
  for (size_t begin = 0; begin < tokens.size();) {
    const size_t n = chunk == 0 ? tokens.size() : std::min(chunk, tokens.size() - begin);
    std::vector<std::vector<int32_t>> contents;
    std::vector<BatchItem> items;
    for (int i = 0; i < others; ++i) contents.push_back(RandomTokens(rng, len(*rng), vocab));
    for (int i = 0; i < others; ++i) {
      companions.push_back(engine->NewSequence());
      items.push_back(
          {companions.back(), contents[i], {static_cast<int32_t>(contents[i].size() - 1)}});
    }
    const size_t target = items.size();
    items.push_back({seq, std::span<const int32_t>(tokens.data() + begin, n), {}});
    for (size_t i = 0; i < n; ++i) items.back().logits_at.push_back(static_cast<int32_t>(i));
    RouteProbe probe = [&](size_t item, int32_t index, int layer, std::span<const int32_t> ids) {
      if (item == target) {
        routes[begin + index].emplace_back(layer, std::vector<int32_t>(ids.begin(), ids.end()));
      }
    };
    ForwardOutput out;
    EXPECT_TRUE(engine->Forward(items, &out, nullptr, &probe).ok());
    begin += n;
  }
  for (SeqId s : companions) engine->FreeSequence(s);
  engine->FreeSequence(seq);
  return routes;
}

// The route (expert ids per token per MoE layer), as `trace record --layer-digests` records
// it, is bitwise the same alone, chunked, token by token and with 1..31 companions, and it
// is the route of the float64 reference.
TEST_P(MoeModelTest, RouteIsTheSameAloneBatchedAndChunked) {
  std::mt19937_64 rng(8);
  const auto tokens = RandomTokens(&rng, 10, vocab());
  auto engine = EngineOrDie(model(), Numerics::kCanonical, Impl::kAuto, 2);
  const Routes alone = RoutesOf(engine.get(), tokens, 0, 0, &rng, vocab());
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < model()->config().num_layers; ++l) {
    moe_layers += model()->config().IsMoeLayer(l);
  }
  testing::ReferenceForward reference(*model());
  for (size_t t = 0; t < tokens.size(); ++t) {
    reference.Step(tokens[t]);
    ASSERT_EQ(static_cast<int64_t>(alone[t].size()), moe_layers) << "position " << t;
  }
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t j = 0; j < moe_layers; ++j) {
      const auto& [layer, ids] = alone[t][j];
      const auto& [ref_layer, ref_ids] = reference.routes()[t * moe_layers + j];
      EXPECT_EQ(layer, ref_layer);
      EXPECT_EQ(std::vector<int>(ids.begin(), ids.end()), ref_ids)
          << "position " << t << " layer " << layer;
    }
  }
  EXPECT_EQ(RoutesOf(engine.get(), tokens, 1, 0, &rng, vocab()), alone) << "token by token";
  EXPECT_EQ(RoutesOf(engine.get(), tokens, 3, 5, &rng, vocab()), alone) << "chunks of 3, 5 others";
  for (int others : {1, 31}) {
    EXPECT_EQ(RoutesOf(engine.get(), tokens, 0, others, &rng, vocab()), alone)
        << others << " companions";
  }
}

TEST_P(MoeModelTest, ThreadsAndKernelImplementationDoNotChangeAnyBit) {
  std::mt19937_64 rng(3);
  const auto tokens = RandomTokens(&rng, 12, vocab());
  auto base = EngineOrDie(model(), Numerics::kCanonical, Impl::kAuto, 1);
  const auto expected = AllLogits(base.get(), tokens, 0);
  auto three = EngineOrDie(model(), Numerics::kCanonical, Impl::kAuto, 3);
  EXPECT_EQ(Bits(AllLogits(three.get(), tokens, 5)), Bits(expected)) << "3 threads, chunks of 5";
  auto ref = EngineOrDie(model(), Numerics::kCanonical, Impl::kReference, 2);
  EXPECT_EQ(Bits(AllLogits(ref.get(), tokens, 0)), Bits(expected)) << "scalar reference";
}

TEST_P(MoeModelTest, PrefixHitContinuesBitwise) {
  std::mt19937_64 rng(7);
  const auto tokens = RandomTokens(&rng, 30, vocab());
  auto engine = EngineOrDie(model(), Numerics::kCanonical, Impl::kAuto, 2);
  const auto expected = AllLogits(engine.get(), tokens, 0);
  // A cached prefix of 18 tokens, forked, then the rest as one chunk (a prefix-cache hit).
  const SeqId src = engine->NewSequence();
  BatchItem prefix{src, std::span<const int32_t>(tokens.data(), 18), {}};
  ForwardOutput out;
  ASSERT_TRUE(engine->Forward(std::span<const BatchItem>(&prefix, 1), &out).ok());
  auto fork = engine->ForkSequence(src, 18);
  ASSERT_TRUE(fork.ok()) << fork.status().ToString();
  BatchItem rest{*fork, std::span<const int32_t>(tokens.data() + 18, tokens.size() - 18), {}};
  for (int32_t i = 0; i < static_cast<int32_t>(tokens.size() - 18); ++i) {
    rest.logits_at.push_back(i);
  }
  ASSERT_TRUE(engine->Forward(std::span<const BatchItem>(&rest, 1), &out).ok());
  EXPECT_EQ(Bits(out.logits),
            Bits(std::span<const float>(expected.data() + 18 * vocab(), out.logits.size())));
}

// Tolerance: the relative L2 error of the whole logits vector against the float64 forward
// pass stays under 1e-4, as for the dense models (f32 with canonical sums is ~1e-6 here).
// A route flip between f32 and f64 would show as an error far above that.
TEST_P(MoeModelTest, LogitsAgreeWithFloat64Reference) {
  std::mt19937_64 rng(4);
  const auto tokens = RandomTokens(&rng, 6, vocab());
  for (Numerics numerics : {Numerics::kCanonical, Numerics::kFast}) {
    auto engine = EngineOrDie(model(), numerics, Impl::kAuto, 2);
    // Fast routing caps experts per pass, so it runs token by token here (one row per pass
    // drops nothing); canonical runs the prompt in one pass.
    const auto logits = AllLogits(engine.get(), tokens, numerics == Numerics::kFast ? 1 : 0);
    testing::ReferenceForward reference(*model());
    double max_err = 0;
    for (size_t t = 0; t < tokens.size(); ++t) {
      const auto want = reference.Step(tokens[t]);
      const double err = testing::RelativeL2(
          std::span<const float>(logits.data() + t * vocab(), static_cast<size_t>(vocab())), want);
      EXPECT_LT(err, 1e-4) << kernels::NumericsName(numerics) << " position " << t;
      max_err = std::max(max_err, err);
    }
    std::printf("%s %s: max relative L2 error vs float64 %.3g\n", GetParam().c_str(),
                kernels::NumericsName(numerics), max_err);
    // The reference really routed: one route per MoE layer per token.
    int64_t moe_layers = 0;
    for (int64_t l = 0; l < model()->config().num_layers; ++l) {
      moe_layers += model()->config().IsMoeLayer(l);
    }
    EXPECT_EQ(reference.routes().size(), tokens.size() * moe_layers);
  }
}

TEST_P(MoeModelTest, FastCapacityRoutingMovesWithTheBatch) {
  std::mt19937_64 rng(6);
  const auto target = RandomTokens(&rng, 20, vocab());
  auto engine = EngineOrDie(model(), Numerics::kFast, Impl::kAuto, 2);
  const auto alone = AllLogits(engine.get(), target, 0);
  // The same rows alone give the same bits in fast mode too (a fixed batch is deterministic);
  // with 31 companions, capacity drops change some of the target's expert choices.
  EXPECT_EQ(Bits(AllLogits(engine.get(), target, 0)), Bits(alone));
  EXPECT_NE(Bits(WithCompanions(engine.get(), target, 31, &rng, vocab())), Bits(alone));
}

// The MoE part of canonical-v2 pinned: the last-token logits digest of "Hello, world!" on
// each preset (seed 5), on the AVX2 and the scalar reference engines. A change here is a
// change of the contract's routing (docs/numerics.md "MoE routing"): bump the version.
TEST_P(MoeModelTest, PinnedLogitsDigest) {
  static const std::map<std::string, std::string> pinned = {
      {"qwen3-moe-tiny", "9d92b04e886aa6c3"}, {"mixtral-tiny", "542244a7aa4528a8"},
      {"mixed", "66c6b6ef4322a76f"},          {"qwen3-moe-a3b-narrow", "12445b7fabc2737f"},
      {"qwen2-moe-tiny", "9aaf17e75880c459"},
  };
  const std::vector<int32_t> tokens = {9707, 11, 1879, 0};
  for (Impl impl : {Impl::kAuto, Impl::kReference}) {
    auto engine = EngineOrDie(model(), Numerics::kCanonical, impl, 2);
    const SeqId seq = engine->NewSequence();
    BatchItem item{seq, tokens, {static_cast<int32_t>(tokens.size() - 1)}};
    ForwardOutput out;
    ASSERT_TRUE(engine->Forward(std::span<const BatchItem>(&item, 1), &out).ok());
    EXPECT_EQ(DigestHex(LogitsDigest(out.row(0))), pinned.at(GetParam()))
        << (impl == Impl::kAuto ? "auto" : "reference");
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, MoeModelTest,
                         ::testing::Values("qwen3-moe-tiny", "mixtral-tiny", "mixed",
                                           "qwen3-moe-a3b-narrow", "qwen2-moe-tiny"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) ch = std::isalnum(ch) ? ch : '_';
                           return s;
                         });

}  // namespace
}  // namespace trace::engine
