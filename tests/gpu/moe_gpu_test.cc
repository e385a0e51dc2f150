// Mixture-of-experts models on the CUDA engine against the CPU engine, both canonical: every
// logit bit for bit on qwen3-moe-tiny, qwen2-moe-tiny (shared expert), mixtral-tiny and
// qwen3-moe-a3b-narrow (128 experts, top 8), alone and batched (the device groups the pass's
// rows by expert), CUDA graphs on and off, chunked prefill and prefix forks (CheckPreset);
// and every row's route (expert ids per MoE layer, through the RouteProbe) equal on both
// engines, alone and in a batch of 32. Run by tests/gpu/check.sh; skips without a device.
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "tests/gpu/engine_gpu_util.h"
#include "tests/gpu/gpu_test.h"

namespace {

using namespace trace::gputest::engine_util;  // NOLINT: test brevity

GPU_TEST(MoeQwen3TinyBitwiseEqualsCpu) {
  CheckPreset("qwen3-moe-tiny", 0, 24, 6, {1, 2, 7, 32, 64});
}

GPU_TEST(MoeQwen2TinyWithSharedExpertBitwiseEqualsCpu) {
  CheckPreset("qwen2-moe-tiny", 0, 24, 6, {1, 2, 7, 32, 64});
}

GPU_TEST(MoeMixtralTinyBitwiseEqualsCpu) {
  CheckPreset("mixtral-tiny", 0, 16, 4, {1, 7, 32});
}

GPU_TEST(MoeA3bNarrowBitwiseEqualsCpu) {
  CheckPreset("qwen3-moe-a3b-narrow", 0, 16, 4, {1, 7, 64});
}

// The routes of one sequence's rows, [(token index, layer)] -> experts, run alone or with
// `companions` random sequences in the same Forward call.
using RouteMap = std::map<std::pair<int32_t, int>, std::vector<int32_t>>;
RouteMap Routes(Engine* engine, const std::vector<int32_t>& tokens, int companions, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t vocab = engine->model().config().vocab_size;
  std::vector<std::vector<int32_t>> contents;
  std::vector<BatchItem> items;
  for (int i = 0; i < companions; ++i) contents.push_back(RandomTokens(&rng, 1 + i % 9, vocab));
  for (int i = 0; i < companions; ++i) {
    items.push_back(
        {engine->NewSequence(), contents[i], {static_cast<int32_t>(contents[i].size() - 1)}});
  }
  const size_t target = items.size();
  items.push_back({engine->NewSequence(), tokens, {}});
  for (size_t t = 0; t < tokens.size(); ++t)
    items.back().logits_at.push_back(static_cast<int32_t>(t));
  RouteMap routes;
  RouteProbe probe = [&](size_t item, int32_t index, int layer, std::span<const int32_t> ids) {
    if (item == target) routes[{index, layer}] = std::vector<int32_t>(ids.begin(), ids.end());
  };
  ForwardOutput out;
  trace::Status st = engine->Forward(items, &out, nullptr, &probe);
  if (!st.ok()) {
    std::printf("  Forward: %s\n", st.ToString().c_str());
    trace::gputest::CurrentFailed() = true;
  }
  for (const BatchItem& item : items) engine->FreeSequence(item.seq);
  return routes;
}

GPU_TEST(MoeRoutesEqualCpuAloneAndBatched) {
  for (const char* preset : {"qwen3-moe-tiny", "qwen2-moe-tiny"}) {
    auto m = MakeModel(preset, 11, 0);
    if (m == nullptr) {
      trace::gputest::CurrentFailed() = true;
      return;
    }
    std::mt19937_64 rng(9);
    const auto tokens = RandomTokens(&rng, 12, m->model->config().vocab_size);
    auto cpu = MakeEngine(m->model, "cpu");
    auto gpu = MakeEngine(m->model, "cuda");
    if (cpu == nullptr || gpu == nullptr) return;
    const RouteMap expected = Routes(cpu.get(), tokens, 0, 1);
    const int64_t k = m->model->config().num_experts_per_tok;
    if (expected.size() != tokens.size() * static_cast<size_t>(m->model->config().num_layers)) {
      std::printf("  %s: %zu routes on the CPU\n", preset, expected.size());
      trace::gputest::CurrentFailed() = true;
    }
    for (int companions : {0, 31}) {
      const RouteMap got = Routes(gpu.get(), tokens, companions, 2 + companions);
      if (got != expected) {
        std::printf("  %s: GPU routes with %d companions differ from the CPU's (k = %lld)\n",
                    preset, companions, static_cast<long long>(k));
        trace::gputest::CurrentFailed() = true;
      }
    }
  }
}

}  // namespace
