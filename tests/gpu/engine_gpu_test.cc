// The CUDA engine against the CPU engine, both canonical: every logit bit for bit, for the
// tiny preset and two real-shape presets (fewer layers), prefill and decode, alone and
// batched with 1, 6, 31 and 63 random companions (batch sizes 2, 7, 32, 64); the golden
// digests pinned in tests/engine/forward_test.cc hold on the GPU; device errors are clear.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include "base/hash.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/engine.h"
#include "engine/model_init.h"
#include "tests/gpu/gpu_test.h"

namespace {

using namespace trace::engine;  // NOLINT: test brevity
using trace::kernels::Impl;
using trace::kernels::Numerics;

std::string TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "trace-gpu-XXXXXX").string();
  char* made = mkdtemp(tmpl.data());
  return made != nullptr ? std::string(made) : std::string();
}

struct TempModel {
  std::string dir;
  std::shared_ptr<const Model> model;
  ~TempModel() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

// A seeded model of `preset` with `layers` layers (0: the preset's own).
std::unique_ptr<TempModel> MakeModel(const std::string& preset, uint64_t seed, int64_t layers) {
  auto m = std::make_unique<TempModel>();
  m->dir = TempDir();
  auto config = PresetConfig(preset);
  if (!config.ok()) {
    std::printf("  preset %s: %s\n", preset.c_str(), config.status().ToString().c_str());
    return nullptr;
  }
  if (layers > 0) config->num_layers = layers;
  trace::Status st = InitModelFromConfig(*config, seed, m->dir + "/m", 1, preset);
  if (!st.ok()) {
    std::printf("  InitModel %s: %s\n", preset.c_str(), st.ToString().c_str());
    return nullptr;
  }
  auto model = Model::Load(m->dir + "/m", /*hash_weights=*/false);
  if (!model.ok()) {
    std::printf("  Model::Load: %s\n", model.status().ToString().c_str());
    return nullptr;
  }
  m->model = *model;
  return m;
}

std::unique_ptr<Engine> MakeEngine(std::shared_ptr<const Model> model, const std::string& device,
                                   Numerics numerics = Numerics::kCanonical) {
  EngineOptions options;
  options.numerics = numerics;
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

std::vector<int32_t> RandomTokens(std::mt19937_64* rng, size_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(n);
  for (auto& x : t) x = dist(*rng);
  return t;
}

// Feeds `prompt` in one prefill pass asking every position's logits, then `steps` decode
// steps feeding back `forced` tokens (teacher-forced: the same for both engines). In every
// Forward call the sequence is batched with `companions` other sequences that get random
// prefill chunks and decode steps. Returns the sequence's logits, [positions, vocab].
std::vector<float> RunSequence(Engine* engine, const std::vector<int32_t>& prompt,
                               const std::vector<int32_t>& forced, int companions, uint64_t seed) {
  const int64_t vocab = engine->model().config().vocab_size;
  std::mt19937_64 rng(seed);
  std::vector<SeqId> others;
  for (int i = 0; i < companions; ++i) others.push_back(engine->NewSequence());
  const SeqId seq = engine->NewSequence();
  std::vector<float> logits;
  for (size_t step = 0; step <= forced.size(); ++step) {
    std::vector<int32_t> mine = step == 0 ? prompt : std::vector<int32_t>{forced[step - 1]};
    std::vector<std::vector<int32_t>> other_tokens;
    for (int i = 0; i < companions; ++i) {
      const size_t n = (rng() % 4 == 0) ? 1 + rng() % 24 : 1;  // some prefill chunks, mostly decode
      other_tokens.push_back(RandomTokens(&rng, n, vocab));
    }
    std::vector<BatchItem> items;
    const size_t where = companions > 0 ? rng() % (companions + 1) : 0;
    for (int i = 0; i < companions; ++i) {
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
    const size_t first_row = where;
    for (size_t t = 0; t < mine.size(); ++t) {
      auto row = out.row(first_row + t);
      logits.insert(logits.end(), row.begin(), row.end());
    }
  }
  for (SeqId s : others) engine->FreeSequence(s);
  engine->FreeSequence(seq);
  return logits;
}

void CheckPreset(const std::string& preset, int64_t layers, size_t prompt_len, size_t steps,
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
  if (cpu == nullptr || gpu == nullptr) return;
  const std::vector<float> expected = RunSequence(cpu.get(), prompt, forced, 0, 1);
  // CPU decode must equal CPU prefill for the same positions: run the whole thing as one
  // prefill too, so the GPU is also compared against a single pass.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), forced.begin(), forced.end());
  const std::vector<float> gpu_one_pass = RunSequence(gpu.get(), all, {}, 0, 1);
  const std::string tag =
      preset + " (" + std::to_string(m->model->config().num_layers) + " layers)";
  EXPECT_BITS_EQ((tag + " prefill of prompt+forced, gpu vs cpu prefill+decode").c_str(),
                 expected.data(), gpu_one_pass.data(), expected.size());
  for (int batch : batch_sizes) {
    const std::vector<float> got = RunSequence(gpu.get(), prompt, forced, batch - 1, 100 + batch);
    if (got.size() != expected.size()) {
      std::printf("  %s batch %d: %zu logits, expected %zu\n", tag.c_str(), batch, got.size(),
                  expected.size());
      trace::gputest::CurrentFailed() = true;
      continue;
    }
    EXPECT_BITS_EQ((tag + " batch " + std::to_string(batch) + " prefill+decode").c_str(),
                   expected.data(), got.data(), expected.size());
  }
}

GPU_TEST(TinyBitwiseEqualsCpuAtEveryBatchSize) {
  CheckPreset("tiny", 0, 40, 8, {1, 2, 7, 32, 64});
}

GPU_TEST(Qwen3RealShapeBitwiseEqualsCpu) {
  CheckPreset("qwen3-0.6b", 2, 12, 3, {1, 7, 64});
}

GPU_TEST(Qwen25RealShapeBitwiseEqualsCpu) {
  CheckPreset("qwen2.5-0.5b", 2, 12, 3, {1, 2, 32});
}

// The golden digests of tests/engine/forward_test.cc (read from the source, so they cannot
// drift apart): the same model, prompts and digests on the GPU.
GPU_TEST(GoldenDigestsHoldOnGpu) {
  // $TRACE_SOURCE_DIR wins over the build's path: binaries may run on another machine.
  const char* env_root = std::getenv("TRACE_SOURCE_DIR");
  const std::string source = std::string(env_root != nullptr ? env_root : TRACE_SOURCE_DIR) +
                             "/tests/engine/forward_test.cc";
  std::ifstream in(source);
  if (!in) std::printf("  %s not found: comparing with the CPU only\n", source.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string src = ss.str();
  std::map<std::string, std::string> golden;
  const std::regex entry("\\{\"(short|chat)\", \"([0-9a-fA-FxX]+)\"\\}");
  for (auto it = std::sregex_iterator(src.begin(), src.end(), entry); it != std::sregex_iterator();
       ++it) {
    golden[(*it)[1]] = (*it)[2];
  }
  const std::map<std::string, std::vector<int32_t>> prompts = {
      {"short", {9707, 11, 1879, 0}},
      {"chat", {151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198}},
  };
  auto m = std::make_unique<TempModel>();
  m->dir = TempDir();
  if (!InitModel("tiny", 7, m->dir + "/tiny").ok()) {
    EXPECT_TRUE_MSG(false, "InitModel tiny seed 7 failed");
    return;
  }
  auto model = Model::Load(m->dir + "/tiny", false);
  if (!model.ok()) {
    EXPECT_TRUE_MSG(false, "%s", model.status().ToString().c_str());
    return;
  }
  auto cpu = MakeEngine(*model, "cpu");
  auto gpu = MakeEngine(*model, "cuda");
  if (cpu == nullptr || gpu == nullptr) return;
  for (const auto& [name, tokens] : prompts) {
    std::string digests[2];
    Engine* engines[2] = {cpu.get(), gpu.get()};
    for (int e = 0; e < 2; ++e) {
      BatchItem item{engines[e]->NewSequence(), tokens, {static_cast<int32_t>(tokens.size() - 1)}};
      ForwardOutput out;
      trace::Status st = engines[e]->Forward(std::span<const BatchItem>(&item, 1), &out);
      if (!st.ok()) {
        EXPECT_TRUE_MSG(false, "%s", st.ToString().c_str());
        return;
      }
      digests[e] = trace::DigestHex(trace::LogitsDigest(out.row(0)));
    }
    std::printf("  golden %s: cpu %s gpu %s pinned %s\n", name.c_str(), digests[0].c_str(),
                digests[1].c_str(), golden.count(name) ? golden[name].c_str() : "(not pinned yet)");
    EXPECT_TRUE_MSG(digests[0] == digests[1], "%s: gpu digest %s != cpu %s", name.c_str(),
                    digests[1].c_str(), digests[0].c_str());
    if (golden.count(name)) {
      EXPECT_TRUE_MSG(digests[1] == golden[name], "%s: gpu digest %s != pinned %s", name.c_str(),
                      digests[1].c_str(), golden[name].c_str());
    }
  }
}

GPU_TEST(FastModeIsCloseButNotRequiredBitwise) {
  auto m = MakeModel("qwen3-0.6b", 11, 2);
  if (m == nullptr) {
    trace::gputest::CurrentFailed() = true;
    return;
  }
  std::mt19937_64 rng(6);
  const auto prompt = RandomTokens(&rng, 12, m->model->config().vocab_size);
  auto canonical = MakeEngine(m->model, "cuda");
  auto fast = MakeEngine(m->model, "cuda", Numerics::kFast);
  if (canonical == nullptr || fast == nullptr) return;
  const auto ref = RunSequence(canonical.get(), prompt, {}, 0, 1);
  int distinct_bits = 0;
  std::vector<float> first;
  for (int batch : {1, 7, 64}) {
    const auto got = RunSequence(fast.get(), prompt, {}, batch - 1, 200 + batch);
    if (got.size() != ref.size()) {
      EXPECT_TRUE_MSG(false, "fast batch %d: %zu logits, expected %zu", batch, got.size(),
                      ref.size());
      return;
    }
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
      norm += double(ref[i]) * ref[i];
    }
    // bf16 activations into the tensor cores: about 3 significant digits.
    EXPECT_TRUE_MSG(std::sqrt(err / norm) < 2e-2, "fast batch %d: relative L2 %.3g vs canonical",
                    batch, std::sqrt(err / norm));
    if (first.empty()) {
      first = got;
      distinct_bits = 1;
    } else if (std::memcmp(first.data(), got.data(), got.size() * 4) != 0) {
      ++distinct_bits;
    }
    std::printf("  fast batch %d: relative L2 vs canonical %.3g\n", batch, std::sqrt(err / norm));
  }
  std::printf("  fast: %d distinct logit vectors over batch sizes 1, 7, 64 (canonical: 1)\n",
              distinct_bits);
}

GPU_TEST(DeviceErrorsAreClear) {
  auto m = MakeModel("tiny", 3, 1);
  if (m == nullptr) {
    trace::gputest::CurrentFailed() = true;
    return;
  }
  EngineOptions options;
  options.device = "cuda:99";
  auto missing = CreateCudaEngine(m->model, options);
  EXPECT_TRUE_MSG(!missing.ok() && missing.status().message().find("cuda:99") != std::string::npos,
                  "cuda:99: %s", missing.ok() ? "created" : missing.status().ToString().c_str());
  options.device = "cuda:x";
  auto bad = CreateCudaEngine(m->model, options);
  EXPECT_TRUE_MSG(!bad.ok() && bad.status().code() == trace::StatusCode::kInvalidArgument,
                  "cuda:x: %s", bad.ok() ? "created" : bad.status().ToString().c_str());
}

}  // namespace
