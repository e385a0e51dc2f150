// A few steps at the real widths of qwen2.5-0.5b (Qwen2: biases, 14 heads over 2 KV heads)
// and qwen3-0.6b (Qwen3: q/k norms, head_dim 128), with fewer layers to keep CI fast:
// bitwise invariance to batching, chunking, threads and kernel implementation, and accuracy
// against the float64 reference.
#include "engine_test_util.h"
#include "reference_forward.h"

namespace trace::engine {
namespace {

using kernels::Impl;
using kernels::Numerics;
using testing::Bits;
using testing::EngineOrDie;
using testing::RandomTokens;

// Logits at the last token after feeding `tokens` in chunks of `chunk`, with `others`
// companion sequences (random tokens) in every Forward call.
std::vector<float> LastLogits(Engine* engine, const std::vector<int32_t>& tokens, size_t chunk,
                              int others, std::mt19937_64* rng) {
  const int32_t vocab = static_cast<int32_t>(engine->model().config().vocab_size);
  SeqId seq = engine->NewSequence();
  std::vector<SeqId> companions;
  for (int i = 0; i < others; ++i) companions.push_back(engine->NewSequence());
  ForwardOutput out;
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    size_t n = std::min(chunk, tokens.size() - begin);
    std::vector<std::vector<int32_t>> other_tokens;
    for (int i = 0; i < others; ++i) {
      other_tokens.push_back(RandomTokens(rng, 1 + (*rng)() % 5, vocab));
    }
    std::vector<BatchItem> items;
    for (int i = 0; i < others; ++i) items.push_back({companions[i], other_tokens[i], {0}});
    items.insert(items.begin() + others / 2,
                 BatchItem{seq,
                           std::span<const int32_t>(tokens.data() + begin, n),
                           {static_cast<int32_t>(n - 1)}});
    Status st = engine->Forward(items, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  for (SeqId s : companions) engine->FreeSequence(s);
  engine->FreeSequence(seq);
  auto row = out.row(others / 2);
  return {row.begin(), row.end()};
}

class RealShapeTest : public ::testing::TestWithParam<std::pair<std::string, int>> {};

TEST_P(RealShapeTest, BitwiseInvariantAndAccurate) {
  const auto& [preset, layers] = GetParam();
  auto config = PresetConfig(preset);
  ASSERT_TRUE(config.ok());
  config->num_layers = layers;
  testing::TempDir tmp;
  ASSERT_TRUE(InitModelFromConfig(*config, 11, tmp.path() + "/m", 1, preset).ok());
  auto model = testing::LoadOrDie(tmp.path() + "/m");
  ASSERT_NE(model, nullptr);
  std::mt19937_64 rng(9);
  const auto tokens = RandomTokens(&rng, 6, static_cast<int32_t>(config->vocab_size));

  auto engine = EngineOrDie(model, Numerics::kCanonical, Impl::kAuto, 2);
  const auto expected = LastLogits(engine.get(), tokens, tokens.size(), 0, &rng);
  EXPECT_EQ(Bits(LastLogits(engine.get(), tokens, 1, 0, &rng)), Bits(expected)) << "decode";
  EXPECT_EQ(Bits(LastLogits(engine.get(), tokens, 4, 3, &rng)), Bits(expected))
      << "chunks of 4 batched with 3";
  EXPECT_EQ(Bits(LastLogits(engine.get(), tokens, tokens.size(), 7, &rng)), Bits(expected))
      << "batched with 7";
  auto one_thread = EngineOrDie(model, Numerics::kCanonical, Impl::kAuto, 1);
  EXPECT_EQ(Bits(LastLogits(one_thread.get(), tokens, 2, 1, &rng)), Bits(expected)) << "1 thread";
  // The pool's dynamic chunks (kernels/thread_pool.h) at 3 and 7 threads, odd row counts.
  for (int threads : {3, 7}) {
    auto pooled = EngineOrDie(model, Numerics::kCanonical, Impl::kAuto, threads);
    EXPECT_EQ(Bits(LastLogits(pooled.get(), tokens, 5, 2, &rng)), Bits(expected))
        << threads << " threads, chunks of 5 batched with 2";
  }
  // Every CPU path this machine has, forced (the scalar reference included).
  for (Impl impl : kernels::AvailableCpuIsaPaths()) {
    auto forced = EngineOrDie(model, Numerics::kCanonical, impl, 2);
    EXPECT_EQ(Bits(LastLogits(forced.get(), tokens, tokens.size(), 0, &rng)), Bits(expected))
        << kernels::CpuIsaPathName(impl);
  }

  testing::ReferenceForward reference(*model);
  std::vector<double> want;
  for (int32_t t : tokens) want = reference.Step(t);
  double rel = testing::RelativeL2(expected, want);
  std::printf("%s x%d layers: relative L2 vs float64 %.3g\n", preset.c_str(), layers, rel);
  EXPECT_LT(rel, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Presets, RealShapeTest,
                         ::testing::Values(std::make_pair(std::string("qwen2.5-0.5b"), 2),
                                           std::make_pair(std::string("qwen3-0.6b"), 1)),
                         [](const auto& info) {
                           std::string name = info.param.first;
                           for (char& ch : name) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace trace::engine
