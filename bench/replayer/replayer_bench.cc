// Replay vs generation, in one run: kUsage below, which --help prints.
//
// The model is a seeded random one written by InitModel into a temporary folder. Both the
// wall-clock ratio and the ratio of process CPU seconds are printed: on a shared, loaded
// machine the CPU-time ratio is the load-independent one (the thread pool blocks, it does
// not spin, so CPU time is work done).

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "perf/machine_peak.h"
#include "replayer/replayer.h"
#include "replayer/verifier.h"
#include "testkit/replay_test_util.h"

using namespace trace;

namespace {

constexpr const char* kUsage =
    R"(replayer_bench: replay vs generation, in one run. Generates model calls the way the
recorder does (one prefill, then one decode step per token), verifies each at once with the
replayer (teacher-forced prefill passes of --chunk tokens) and prints both times, their ratio
(wall clock and process CPU seconds) and whether every call replayed bit for bit.

  replayer_bench [--preset NAME] [--calls N] [--tokens N] [--threads N] [--batch N]
                 [--chunk ROWS]

  --preset NAME  a `trace model init` preset, written with seed 3 (default tiny)
  --calls N      model calls to generate and replay (default 4)
  --tokens N     sampled tokens per call (default 128)
  --threads N    engine threads, 0 = every CPU (default 0)
  --batch N      replay each call beside N - 1 companion sequences of random tokens in
                 every forward pass (batch invariance; default 1)
  --chunk ROWS   logits rows per replay pass (default: VerifyOptions' default)
)";

// A whole non-negative decimal number, or nullopt.
std::optional<int> ParseCount(const char* text) {
  int value = 0;
  const char* end = text + std::strlen(text);
  const auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || ptr == text || value < 0) return std::nullopt;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset = "tiny";
  int calls = 4, tokens = 128, threads = 0, batch = 1, chunk = 0;
  const std::pair<const char*, int*> counts[] = {{"--calls", &calls},
                                                 {"--tokens", &tokens},
                                                 {"--threads", &threads},
                                                 {"--batch", &batch},
                                                 {"--chunk", &chunk}};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "replayer_bench: %s needs a value (--help lists the options)\n",
                   flag.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (flag == "--preset") {
      preset = value;
      continue;
    }
    int* target = nullptr;
    for (const auto& [name, field] : counts) {
      if (flag == name) target = field;
    }
    if (target == nullptr) {
      std::fprintf(stderr, "replayer_bench: unknown argument %s (--help lists them)\n",
                   flag.c_str());
      return 2;
    }
    const std::optional<int> parsed = ParseCount(value);
    if (!parsed) {
      std::fprintf(stderr, "replayer_bench: %s takes a whole number >= 0, got '%s'\n", flag.c_str(),
                   value);
      return 2;
    }
    *target = *parsed;
  }
  replayer::testing::TempDir dir;
  std::string model_dir = dir.file("model");
  if (Status st = engine::InitModel(preset, 3, model_dir); !st.ok()) {
    std::fprintf(stderr, "replayer_bench: %s\n", st.ToString().c_str());
    return 2;
  }
  auto model = engine::Model::Load(model_dir, false);
  if (!model.ok()) {
    std::fprintf(stderr, "replayer_bench: %s\n", model.status().ToString().c_str());
    return 2;
  }
  engine::EngineOptions options;
  options.threads = threads;
  auto eng = engine::Engine::Create(*model, options);
  if (!eng.ok()) {
    std::fprintf(stderr, "replayer_bench: %s\n", eng.status().ToString().c_str());
    return 2;
  }
  auto tokenizer = engine::Tokenizer::Load(model_dir + "/tokenizer.json");
  if (!tokenizer.ok()) return 2;

  engine::SamplingParams params;
  params.temperature = 0.7f;
  params.max_tokens = tokens;
  replayer::VerifyOptions vopts;
  vopts.batch = batch;
  if (chunk > 0) vopts.chunk_rows = chunk;
  // Each call is generated, then replayed at once, so that load drifting on a shared machine
  // hits both halves of every pair alike; the ratio is over the sums.
  double generate_s = 0, generate_cpu = 0, replay_s = 0, replay_cpu = 0;
  std::vector<double> pair_ratios;
  int64_t n_tokens = 0;
  int bitwise = 0;
  for (int c = 0; c < calls; ++c) {
    std::string text = "Call " + std::to_string(c) +
                       ": summarise the quarterly report for the finance team, please.";
    auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = perf::ProcessCpuSeconds();
    auto call =
        replayer::testing::GenerateCall(**eng, (*tokenizer)->Encode(text), params, 100 + c, false);
    if (!call.ok()) {
      std::fprintf(stderr, "replayer_bench: %s\n", call.status().ToString().c_str());
      return 2;
    }
    const double gen_cpu = perf::ProcessCpuSeconds() - cpu0;
    generate_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    generate_cpu += gen_cpu;

    auto rc = replayer::ToRecordedCall(*call, c + 1, c + 1);
    if (!rc.ok()) return 2;
    auto t1 = std::chrono::steady_clock::now();
    const double cpu1 = perf::ProcessCpuSeconds();
    auto report = replayer::VerifyCall(**eng, tokenizer->get(), *rc, vopts);
    if (!report.ok()) {
      std::fprintf(stderr, "replayer_bench: %s\n", report.status().ToString().c_str());
      return 2;
    }
    const double rep_cpu = perf::ProcessCpuSeconds() - cpu1;
    replay_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    replay_cpu += rep_cpu;
    pair_ratios.push_back(rep_cpu > 0 ? gen_cpu / rep_cpu : 0);
    n_tokens += report->tokens_verified;
    bitwise += report->level == replayer::Level::kBitwise;
  }
  std::sort(pair_ratios.begin(), pair_ratios.end());
  std::printf("model %s, %d calls, %lld sampled tokens, threads %d, batch %d\n", preset.c_str(),
              calls, static_cast<long long>(n_tokens), threads, batch);
  std::printf("isa %s, chunk %d logits rows per replay pass\n",
              kernels::CpuIsaPathName(kernels::Impl::kAuto), vopts.chunk_rows);
  std::printf("generation (prefill + decode steps): %.3f s wall, %.3f s CPU\n", generate_s,
              generate_cpu);
  std::printf("replay (teacher-forced verify):      %.3f s wall, %.3f s CPU\n", replay_s,
              replay_cpu);
  std::printf("speedup: %.2fx wall, %.2fx CPU time (target >= 5x); %d/%d calls bitwise\n",
              generate_s / replay_s, generate_cpu / replay_cpu, bitwise, calls);
  std::printf("per call, CPU time: min %.2fx, median %.2fx, max %.2fx\n", pair_ratios.front(),
              pair_ratios[pair_ratios.size() / 2], pair_ratios.back());
  return bitwise == calls ? 0 : 1;
}
