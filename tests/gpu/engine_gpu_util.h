// Helpers of the GPU engine tests (engine_gpu_test.cc, moe_gpu_test.cc): seeded preset models
// in a temporary folder, CPU and CUDA engines, and CheckPreset, which runs one preset's
// prompt prefill + teacher-forced decode on the CPU and on the GPU (alone and batched, CUDA
// graphs on and off, chunked prefill, prefix-cache forks) and compares every logit bit.
//
// Ownership: TempModel owns its folder. Thread safety: tests run one at a time. Errors: a
// failed setup prints one line and marks the current test failed.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "base/hash.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/engine.h"
#include "engine/model_init.h"
#include "testkit/temp_dir.h"
#include "tests/gpu/gpu_test.h"

namespace trace::gputest::engine_util {

using namespace trace::engine;  // NOLINT: test brevity
using trace::kernels::Impl;
using trace::kernels::Numerics;

struct TempModel {
  trace::testing::TempDir dir;  // removed with its contents when the model goes
  std::shared_ptr<const Model> model;
};

// A seeded model of `preset` with `layers` layers (0: the preset's own).
inline std::unique_ptr<TempModel> MakeModel(const std::string& preset, uint64_t seed,
                                            int64_t layers) {
  auto m = std::make_unique<TempModel>();
  if (m->dir.path().empty()) {
    std::printf("  no temporary folder for preset %s: %s\n", preset.c_str(), std::strerror(errno));
    return nullptr;
  }
  auto config = PresetConfig(preset);
  if (!config.ok()) {
    std::printf("  preset %s: %s\n", preset.c_str(), config.status().ToString().c_str());
    return nullptr;
  }
  if (layers > 0) config->num_layers = layers;
  trace::Status st = InitModelFromConfig(*config, seed, m->dir.file("m"), 1, preset);
  if (!st.ok()) {
    std::printf("  InitModel %s: %s\n", preset.c_str(), st.ToString().c_str());
    return nullptr;
  }
  auto model = Model::Load(m->dir.file("m"), /*hash_weights=*/false);
  if (!model.ok()) {
    std::printf("  Model::Load: %s\n", model.status().ToString().c_str());
    return nullptr;
  }
  m->model = *model;
  return m;
}

inline std::unique_ptr<Engine> MakeEngine(std::shared_ptr<const Model> model,
                                          const std::string& device,
                                          Numerics numerics = Numerics::kCanonical,
                                          bool cuda_graphs = true) {
  EngineOptions options;
  options.numerics = numerics;
  options.cuda_graphs = cuda_graphs;
  options.impl = Impl::kAuto;
  options.threads = 0;
  options.device = device;
  options.max_context = 1024;
  auto engine = device == "cpu" ? Engine::Create(std::move(model), options)
                                : CreateCudaEngine(std::move(model), options);
  if (!engine.ok()) {
    std::printf("  engine on %s: %s\n", device.c_str(), engine.status().ToString().c_str());
    trace::gputest::CurrentFailed() = true;
    return nullptr;
  }
  return std::move(engine).value();
}

inline std::vector<int32_t> RandomTokens(std::mt19937_64* rng, size_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(n);
  for (auto& x : t) x = dist(*rng);
  return t;
}

// Feeds `prompt` in prefill chunks of `chunk` tokens (0: one pass) asking every position's
// logits, then `steps` decode steps feeding back `forced` tokens (teacher-forced: the same
// for both engines). In every Forward call the sequence is batched with `companions` other
// sequences that get random prefill chunks and decode steps. With `fork_at` > 0 the prompt's
// first fork_at tokens are first fed to another sequence, which is then forked (a prefix-cache
// hit, as the scheduler does) and only the rest is fed. Returns the logits of every fed
// position, [positions, vocab].
struct RunShape {
  int companions = 0;
  size_t chunk = 0;
  size_t fork_at = 0;
};

inline std::vector<float> RunSequence(Engine* engine, const std::vector<int32_t>& prompt,
                                      const std::vector<int32_t>& forced, const RunShape& shape,
                                      uint64_t seed) {
  const int64_t vocab = engine->model().config().vocab_size;
  std::mt19937_64 rng(seed);
  std::vector<SeqId> others;
  for (int i = 0; i < shape.companions; ++i) others.push_back(engine->NewSequence());
  SeqId seq = engine->NewSequence();
  size_t fed = 0;
  if (shape.fork_at > 0) {
    const SeqId donor = engine->NewSequence();
    BatchItem item{donor, std::span<const int32_t>(prompt.data(), shape.fork_at), {}};
    ForwardOutput out;
    trace::Status st = engine->Forward(std::span<const BatchItem>(&item, 1), &out);
    auto forked = st.ok() ? engine->ForkSequence(donor, static_cast<int64_t>(shape.fork_at))
                          : trace::Result<SeqId>(st);
    if (!forked.ok()) {
      std::printf("  prefix fork: %s\n", forked.status().ToString().c_str());
      trace::gputest::CurrentFailed() = true;
      return {};
    }
    engine->FreeSequence(seq);
    engine->FreeSequence(donor);
    seq = *forked;
    fed = shape.fork_at;
  }
  // The steps: prompt chunks, then one forced token each.
  std::vector<std::vector<int32_t>> steps;
  const size_t chunk = shape.chunk == 0 ? prompt.size() : shape.chunk;
  for (size_t b = fed; b < prompt.size(); b += chunk) {
    steps.emplace_back(prompt.begin() + b, prompt.begin() + std::min(prompt.size(), b + chunk));
  }
  for (int32_t t : forced) steps.push_back({t});
  std::vector<float> logits;
  for (const std::vector<int32_t>& mine : steps) {
    std::vector<std::vector<int32_t>> other_tokens;
    for (int i = 0; i < shape.companions; ++i) {
      const size_t n = (rng() % 4 == 0) ? 1 + rng() % 24 : 1;  // some prefill chunks, mostly decode
      other_tokens.push_back(RandomTokens(&rng, n, vocab));
    }
    std::vector<BatchItem> items;
    const size_t where = shape.companions > 0 ? rng() % (shape.companions + 1) : 0;
    for (int i = 0; i < shape.companions; ++i) {
      items.push_back(
          {others[i], other_tokens[i], {static_cast<int32_t>(other_tokens[i].size() - 1)}});
    }
    BatchItem item{seq, mine, {}};
    for (size_t t = 0; t < mine.size(); ++t) item.logits_at.push_back(static_cast<int32_t>(t));
    items.insert(items.begin() + where, item);
    ForwardOutput out;
    trace::Status st = engine->Forward(items, &out);
    if (!st.ok()) {
      std::printf("  Forward: %s\n", st.ToString().c_str());
      trace::gputest::CurrentFailed() = true;
      return {};
    }
    // Our rows come after those of the items before us (one logits row per companion).
    for (size_t t = 0; t < mine.size(); ++t) {
      auto row = out.row(where + t);
      logits.insert(logits.end(), row.begin(), row.end());
    }
  }
  for (SeqId s : others) engine->FreeSequence(s);
  engine->FreeSequence(seq);
  return logits;
}

inline void ExpectSame(const std::string& what, const std::vector<float>& expected,
                       const std::vector<float>& got) {
  if (got.size() != expected.size()) {
    std::printf("  %s: %zu logits, expected %zu\n", what.c_str(), got.size(), expected.size());
    trace::gputest::CurrentFailed() = true;
    return;
  }
  EXPECT_BITS_EQ(what.c_str(), expected.data(), got.data(), expected.size());
}

// CUDA against CPU, both canonical, on `preset` with `layers` layers: alone and batched at
// every size, with CUDA graphs on and off, prefill in chunks, and prefix-cache forks.
inline void CheckPreset(const std::string& preset, int64_t layers, size_t prompt_len, size_t steps,
                        const std::vector<int>& batch_sizes) {
  auto m = MakeModel(preset, 11, layers);
  if (m == nullptr) {
    trace::gputest::CurrentFailed() = true;
    return;
  }
  std::mt19937_64 rng(5);
  const int64_t vocab = m->model->config().vocab_size;
  const auto prompt = RandomTokens(&rng, prompt_len, vocab);
  const auto forced = RandomTokens(&rng, steps, vocab);
  auto cpu = MakeEngine(m->model, "cpu");
  auto gpu = MakeEngine(m->model, "cuda");
  auto gpu_direct = MakeEngine(m->model, "cuda", Numerics::kCanonical, /*cuda_graphs=*/false);
  if (cpu == nullptr || gpu == nullptr || gpu_direct == nullptr) return;
  // The CPU's prompt prefill + decode: what every GPU run below must give.
  const std::vector<float> expected = RunSequence(cpu.get(), prompt, forced, {}, 1);
  const std::string tag =
      preset + " (" + std::to_string(m->model->config().num_layers) + " layers)";
  // Prefill and decode agree: the GPU's single prefill over prompt+forced.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), forced.begin(), forced.end());
  ExpectSame(tag + " one prefill of prompt+forced", expected,
             RunSequence(gpu.get(), all, {}, {}, 1));
  for (int batch : batch_sizes) {
    ExpectSame(tag + " batch " + std::to_string(batch), expected,
               RunSequence(gpu.get(), prompt, forced, {batch - 1, 0, 0}, 100 + batch));
  }
  ExpectSame(tag + " batch 7, cuda graphs off", expected,
             RunSequence(gpu_direct.get(), prompt, forced, {6, 0, 0}, 107));
  ExpectSame(tag + " chunked prefill (5-token chunks), batch 7", expected,
             RunSequence(gpu.get(), prompt, forced, {6, 5, 0}, 207));
  ExpectSame(tag + " chunked prefill (1-token chunks), batch 2", expected,
             RunSequence(gpu.get(), prompt, forced, {1, 1, 0}, 202));
  ExpectSame(tag + " prefix-cache hit (fork after 7 tokens)", expected,
             RunSequence(gpu.get(), prompt, forced, {0, 0, 7}, 300));
  ExpectSame(tag + " prefix-cache hit (fork after 3 tokens), batch 32", expected,
             RunSequence(gpu.get(), prompt, forced, {31, 4, 3}, 332));
  auto stats = GetCudaEngineStats(*gpu);
  if (stats.ok()) {
    std::printf(
        "  %s: cuda graphs %s, %lld captured, %lld passes replayed, %lld direct, "
        "%lld kernels per graph%s%s\n",
        tag.c_str(), stats->graphs_enabled ? "on" : "OFF",
        static_cast<long long>(stats->graph_captures), static_cast<long long>(stats->graph_replays),
        static_cast<long long>(stats->direct_passes),
        static_cast<long long>(stats->kernels_per_graph),
        stats->graphs_disabled_because.empty() ? "" : ": ", stats->graphs_disabled_because.c_str());
    EXPECT_TRUE_MSG(stats->graphs_enabled && stats->graph_replays > stats->graph_captures,
                    "CUDA graphs were not used: %s", stats->graphs_disabled_because.c_str());
  }
}

}  // namespace trace::gputest::engine_util
