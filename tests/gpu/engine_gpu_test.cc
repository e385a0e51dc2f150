// The CUDA engine against the CPU engine, both canonical: every logit bit for bit, for the
// tiny and gemma3-tiny presets and the real widths of qwen3-0.6b and qwen2.5-0.5b (2 layers):
// prefill and decode, alone and batched with 1, 6, 31 and 63 random companions (batch sizes 2, 7,
// 32, 64), CUDA graphs on and off, prefill in chunks, prefix-cache forks; the golden digests of
// engine/golden.h hold on the GPU; device errors are clear.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "base/hash.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/engine.h"
#include "engine/golden.h"
#include "engine/model_init.h"
#include "tests/gpu/engine_gpu_util.h"
#include "tests/gpu/gpu_test.h"

namespace {

using namespace trace::gputest::engine_util;  // NOLINT: test brevity

GPU_TEST(TinyBitwiseEqualsCpuAtEveryBatchSize) {
  CheckPreset("tiny", 0, 40, 8, {1, 2, 7, 32, 64});
}

GPU_TEST(Qwen3RealShapeBitwiseEqualsCpu) {
  CheckPreset("qwen3-0.6b", 2, 12, 3, {1, 2, 7, 32, 64});
}

GPU_TEST(Qwen25RealShapeBitwiseEqualsCpu) {
  CheckPreset("qwen2.5-0.5b", 2, 12, 3, {1, 2, 7, 32, 64});
}

// The golden digests pinned in engine/golden.h (tests/engine/forward_test.cc holds them on
// the CPU): the same model and prompts on the GPU.
// Gemma 3 (a local layer with a window of 8, then a global one; GeGLU, sandwich norms, scaled
// embeddings, query_pre_attn_scalar): 40 prompt tokens (five windows), alone and batched.
GPU_TEST(Gemma3TinyBitwiseEqualsCpu) {
  CheckPreset("gemma3-tiny", 0, 40, 8, {1, 2, 7, 32});
}

GPU_TEST(GoldenDigestsHoldOnGpu) {
  auto m = std::make_unique<TempModel>();
  if (m->dir.path().empty()) {
    EXPECT_TRUE_MSG(false, "no temporary folder for the golden model");
    return;
  }
  if (!InitModel(kGoldenPreset, kGoldenSeed, m->dir.file("tiny")).ok()) {
    EXPECT_TRUE_MSG(false, "InitModel tiny seed 7 failed");
    return;
  }
  auto model = Model::Load(m->dir.file("tiny"), false);
  if (!model.ok()) {
    EXPECT_TRUE_MSG(false, "%s", model.status().ToString().c_str());
    return;
  }
  for (bool graphs : {true, false}) {
    auto gpu = MakeEngine(*model, "cuda", Numerics::kCanonical, graphs);
    if (gpu == nullptr) return;
    auto digests = GoldenDigests(*gpu);
    if (!digests.ok()) {
      EXPECT_TRUE_MSG(false, "%s", digests.status().ToString().c_str());
      return;
    }
    for (size_t i = 0; i < GoldenPrompts().size(); ++i) {
      std::printf("  golden %s (cuda graphs %s): gpu %s pinned %s\n", GoldenPrompts()[i].name,
                  graphs ? "on" : "off", (*digests)[i].c_str(), GoldenPrompts()[i].digest);
      EXPECT_TRUE_MSG((*digests)[i] == GoldenPrompts()[i].digest, "%s: gpu digest %s != pinned %s",
                      GoldenPrompts()[i].name, (*digests)[i].c_str(), GoldenPrompts()[i].digest);
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
  const auto ref = RunSequence(canonical.get(), prompt, {}, {}, 1);
  int distinct_bits = 0;
  std::vector<float> first;
  for (int batch : {1, 7, 64}) {
    const auto got = RunSequence(fast.get(), prompt, {}, {batch - 1, 0, 0}, 200 + batch);
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
