// Whole-model GPU throughput, canonical and fast in the same run, on seeded models of the
// real presets (qwen3-0.6b, qwen2.5-0.5b; all layers):
//   prefill  one 512-token prompt (logits of the last token), tokens/s
//   decode   B sequences of 64 cached tokens, 32 steps of one token each (logits of every
//            sequence copied to the host each step, as the server does), tokens/s
// Usage: gpu_engine_bench [--presets a,b] [--batches 1,8,64]. Exits 77 without a device.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cuda/cuda_engine.h"
#include "engine/engine.h"
#include "engine/model_init.h"
#include "kernels/cuda/device.h"

namespace {

using namespace trace::engine;  // NOLINT: a benchmark program
using trace::kernels::Numerics;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<int32_t> Tokens(std::mt19937_64* rng, size_t n, int64_t vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>((*rng)() % static_cast<uint64_t>(vocab));
  return t;
}

bool Check(const trace::Status& st, const char* what) {
  if (!st.ok()) std::fprintf(stderr, "%s: %s\n", what, st.ToString().c_str());
  return st.ok();
}

// Prefill tokens/s of one `len`-token prompt (best of 3 after a warm-up).
double Prefill(Engine* engine, size_t len) {
  std::mt19937_64 rng(1);
  const auto prompt = Tokens(&rng, len, engine->model().config().vocab_size);
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    SeqId seq = engine->NewSequence();
    BatchItem item{seq, prompt, {static_cast<int32_t>(len - 1)}};
    ForwardOutput out;
    const auto start = std::chrono::steady_clock::now();
    if (!Check(engine->Forward(std::span<const BatchItem>(&item, 1), &out), "prefill")) return 0;
    const double tps = len / Seconds(start);
    if (rep > 0 && tps > best) best = tps;
    engine->FreeSequence(seq);
  }
  return best;
}

// Decode tokens/s at batch `batch`.
double Decode(Engine* engine, int batch, int steps) {
  std::mt19937_64 rng(2);
  const int64_t vocab = engine->model().config().vocab_size;
  std::vector<SeqId> seqs;
  std::vector<std::vector<int32_t>> prompts;
  for (int b = 0; b < batch; ++b) {
    seqs.push_back(engine->NewSequence());
    prompts.push_back(Tokens(&rng, 64, vocab));
  }
  std::vector<BatchItem> items;
  for (int b = 0; b < batch; ++b) items.push_back({seqs[b], prompts[b], {63}});
  ForwardOutput out;
  if (!Check(engine->Forward(items, &out), "decode prefill")) return 0;
  std::vector<std::vector<int32_t>> next(batch, std::vector<int32_t>(1));
  auto step = [&]() {
    items.clear();
    for (int b = 0; b < batch; ++b) {
      next[b][0] = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
      items.push_back({seqs[b], next[b], {0}});
    }
    return engine->Forward(items, &out);
  };
  if (!Check(step(), "decode warm-up")) return 0;
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    if (!Check(step(), "decode")) return 0;
  }
  const double tps = static_cast<double>(batch) * steps / Seconds(start);
  for (SeqId s : seqs) engine->FreeSequence(s);
  return tps;
}

}  // namespace

int main(int argc, char** argv) {
  std::string presets = "qwen3-0.6b,qwen2.5-0.5b";
  std::string batches = "1,8,64";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--presets") == 0) presets = argv[i + 1];
    if (std::strcmp(argv[i], "--batches") == 0) batches = argv[i + 1];
  }
  if (trace::kernels::cuda::CudaDeviceCount() == 0) {
    std::printf("SKIPPED: no CUDA device is present\n");
    return 77;
  }
  std::printf("%-14s %-16s %14s %14s %10s\n", "preset", "measure", "canonical tok/s", "fast tok/s",
              "canon/fast");
  for (const std::string& preset : Split(presets)) {
    std::error_code tmp_ec;
    std::filesystem::path tmp = std::filesystem::temp_directory_path(tmp_ec);
    if (tmp_ec) tmp = "/tmp";
    std::string tmpl = (tmp / "trace-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return 1;
    const std::string dir = tmpl + "/m";
    if (!Check(InitModel(preset, 1, dir), "InitModel")) return 1;
    auto model = Model::Load(dir, /*hash_weights=*/false);
    if (!Check(model.status(), "Model::Load")) return 1;
    std::unique_ptr<Engine> engines[2];
    for (int e = 0; e < 2; ++e) {
      EngineOptions options;
      options.device = "cuda";
      options.numerics = e == 0 ? Numerics::kCanonical : Numerics::kFast;
      options.max_context = 2048;
      auto engine = CreateCudaEngine(*model, options);
      if (!Check(engine.status(), "CreateCudaEngine")) return 1;
      engines[e] = std::move(engine).value();
    }
    const double pc = Prefill(engines[0].get(), 512);
    const double pf = Prefill(engines[1].get(), 512);
    std::printf("%-14s %-16s %14.1f %14.1f %10.2f\n", preset.c_str(), "prefill 512", pc, pf,
                pc / pf);
    for (const std::string& b : Split(batches)) {
      const int batch = std::stoi(b);
      const double dc = Decode(engines[0].get(), batch, 32);
      const double df = Decode(engines[1].get(), batch, 32);
      std::printf("%-14s %-16s %14.1f %14.1f %10.2f\n", preset.c_str(),
                  ("decode batch " + b).c_str(), dc, df, dc / df);
      std::fflush(stdout);
    }
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
  }
  return 0;
}
