// Replay vs generation, in one run: generates a set of model calls the way the recorder
// does (one prefill, then one decode step per token), then verifies the same calls with the
// replayer (one teacher-forced prefill per call), and prints both times and their ratio.
//
//   replayer_bench [--preset tiny] [--calls 4] [--tokens 128] [--threads 0] [--batch 1]
//
// The model is a seeded random one written by InitModel into a temporary folder.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "replayer/replayer.h"
#include "replayer/verifier.h"
#include "tests/replayer/replay_test_util.h"

using namespace trace;

int main(int argc, char** argv) {
  std::string preset = "tiny";
  int calls = 4, tokens = 128, threads = 0, batch = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--preset")
      preset = argv[i + 1];
    else if (flag == "--calls")
      calls = std::atoi(argv[i + 1]);
    else if (flag == "--tokens")
      tokens = std::atoi(argv[i + 1]);
    else if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (flag == "--batch")
      batch = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "replayer_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
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
  std::vector<proto::LlmCall> recorded;
  auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < calls; ++c) {
    std::string text = "Call " + std::to_string(c) +
                       ": summarise the quarterly report for the finance team, please.";
    auto call =
        replayer::testing::GenerateCall(**eng, (*tokenizer)->Encode(text), params, 100 + c, false);
    if (!call.ok()) {
      std::fprintf(stderr, "replayer_bench: %s\n", call.status().ToString().c_str());
      return 2;
    }
    recorded.push_back(std::move(*call));
  }
  double generate_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int64_t n_tokens = 0;
  replayer::VerifyOptions vopts;
  vopts.batch = batch;
  auto t1 = std::chrono::steady_clock::now();
  int bitwise = 0;
  for (int c = 0; c < calls; ++c) {
    auto rc = replayer::ToRecordedCall(recorded[c], c + 1, c + 1);
    if (!rc.ok()) return 2;
    auto report = replayer::VerifyCall(**eng, tokenizer->get(), *rc, vopts);
    if (!report.ok()) {
      std::fprintf(stderr, "replayer_bench: %s\n", report.status().ToString().c_str());
      return 2;
    }
    n_tokens += report->tokens_verified;
    bitwise += report->level == replayer::Level::kBitwise;
  }
  double replay_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("model %s, %d calls, %lld sampled tokens, threads %d, batch %d\n", preset.c_str(),
              calls, static_cast<long long>(n_tokens), threads, batch);
  std::printf("generation (prefill + decode steps): %.3f s\n", generate_s);
  std::printf("replay (teacher-forced verify):      %.3f s\n", replay_s);
  std::printf("speedup: %.2fx (target >= 5x); %d/%d calls bitwise\n", generate_s / replay_s,
              bitwise, calls);
  return bitwise == calls ? 0 : 1;
}
