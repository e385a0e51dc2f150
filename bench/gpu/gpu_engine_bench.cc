// Whole-model GPU throughput, canonical and fast in the same run, on seeded models of the
// real presets (qwen3-0.6b, qwen2.5-0.5b; all layers):
//   prefill  one 512-token prompt (logits of the last token), tokens/s
//   decode   B sequences of 64 cached tokens, 32 steps of one token each (logits of every
//            sequence copied to the host each step, as the server does), tokens/s
// Canonical decode runs twice: with each pass's layers as one CUDA graph (the default) and
// with every kernel launched on its own; "launch share" = 1 - graph time / direct time, the
// part of a direct decode step the launches cost (the GPU waiting for the host), measured
// in the same run. "kernels/step" is the number of launches one graph replaces.
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
  std::printf("%-13s %-15s %12s %12s %12s %9s %8s %12s\n", "preset", "measure", "canon tok/s",
              "direct tok/s", "fast tok/s", "canon/fast", "launch%", "kernels/step");
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
    // 0: canonical with CUDA graphs, 1: canonical launching each kernel, 2: fast.
    std::unique_ptr<Engine> engines[3];
    for (int e = 0; e < 3; ++e) {
      EngineOptions options;
      options.device = "cuda";
      options.numerics = e == 2 ? Numerics::kFast : Numerics::kCanonical;
      options.cuda_graphs = e != 1;
      options.max_context = 2048;
      auto engine = CreateCudaEngine(*model, options);
      if (!Check(engine.status(), "CreateCudaEngine")) return 1;
      engines[e] = std::move(engine).value();
    }
    const double pc = Prefill(engines[0].get(), 512);
    const double pf = Prefill(engines[2].get(), 512);
    std::printf("%-13s %-15s %12.1f %12s %12.1f %9.2f %8s %12s\n", preset.c_str(), "prefill 512",
                pc, "-", pf, pc / pf, "-", "-");
    for (const std::string& b : Split(batches)) {
      const int batch = std::stoi(b);
      const double dc = Decode(engines[0].get(), batch, 32);
      const double dd = Decode(engines[1].get(), batch, 32);
      const double df = Decode(engines[2].get(), batch, 32);
      auto stats = GetCudaEngineStats(*engines[0]);
      const long long kernels = stats.ok() ? static_cast<long long>(stats->kernels_per_graph) : -1;
      std::printf("%-13s %-15s %12.1f %12.1f %12.1f %9.2f %7.1f%% %12lld\n", preset.c_str(),
                  ("decode batch " + b).c_str(), dc, dd, df, dc / df,
                  dd > 0 && dc > 0 ? 100.0 * (1.0 - dd / dc) : 0.0, kernels);
      if (stats.ok() && !stats->graphs_enabled) {
        std::printf("  (CUDA graphs turned off: %s)\n", stats->graphs_disabled_because.c_str());
      }
      std::fflush(stdout);
    }
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
  }
  return 0;
}
