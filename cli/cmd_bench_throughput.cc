// `trace bench throughput`: runs the canonical-vs-fast sweep (perf::RunThroughputSweep,
// perf/throughput.h) and, on the CPU, the fp32 FMA peak (perf/machine_peak.h), and prints
// prefill and decode tokens/s per batch size with the ratio canonical/fast; as a table, or one
// JSON object with --json. Presentation only; cmd_bench.cc registers the command and parses
// its options into cmd_bench_throughput::Args (cli/cmd_bench.h).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/json_print.h"
#include "cli/cmd_bench.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "engine/engine.h"
#include "kernels/kernels.h"
#include "perf/machine_peak.h"
#include "perf/model_folder.h"
#include "perf/throughput.h"

namespace trace::cli::cmd_bench_throughput {
namespace {

using cmd_bench::Progress;

Result<std::vector<int64_t>> ParseBatches(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 1 || v > 65536) {
      return InvalidArgument("bench throughput: --batch: '" + part +
                             "' is not a batch size (1..65536)");
    }
    out.push_back(v);
  }
  if (out.empty()) return InvalidArgument("bench throughput: --batch: no batch sizes");
  return out;
}

}  // namespace

int Run(const Args& args) {
  const std::string what = "bench throughput";
  auto batches = ParseBatches(args.batches);
  if (!batches.ok()) return ReportError(batches.status());
  Result<EngineSetup> flags = ResolveEngineFlags(args.engine, EngineUse::kBenchSweep);
  if (!flags.ok()) return ReportError(flags.status());
  auto loaded = perf::LoadModelFolder(flags->model_dir);
  if (!loaded.ok()) return ReportError(loaded.status());
  const engine::ModelConfig& config = loaded->model->config();
  if (args.prompt_len + args.decode_tokens + 1 > config.max_position_embeddings) {
    return ReportError(
        InvalidArgument(what + ": --prompt-len + --decode-tokens exceeds the model's " +
                        std::to_string(config.max_position_embeddings) + " positions"));
  }
  const kernels::Numerics modes[2] = {kernels::Numerics::kCanonical, kernels::Numerics::kFast};
  std::unique_ptr<engine::Engine> engines[2];
  for (int m = 0; m < 2; ++m) {
    engine::EngineOptions options = flags->engine;
    options.numerics = modes[m];
    options.max_context = std::min<int64_t>(
        config.max_position_embeddings,
        std::max(args.prompt_len + args.decode_tokens + 1, 16));  // 16: the warm-up
    auto e = engine::Engine::Create(loaded->model, options);
    if (!e.ok()) return ReportError(e.status().WithContext(what));
    engines[m] = std::move(e).value();
  }
  const int64_t upper = std::min<int64_t>(
      config.vocab_size, loaded->tokenizer ? loaded->tokenizer->vocab_size() : config.vocab_size);
  perf::SweepOptions sweep;
  sweep.batches = *batches;
  sweep.prompt_len = args.prompt_len;
  sweep.decode_tokens = args.decode_tokens;
  sweep.repeat = args.repeat;
  sweep.seed = args.seed;
  Progress progress;
  auto swept = perf::RunThroughputSweep(
      {engines[0].get(), engines[1].get()}, sweep, upper, loaded->tokenizer.get(),
      [&](const std::string& what_now) { progress.Update("%s", what_now.c_str()); });
  progress.Done();
  if (!swept.ok()) return ReportError(swept.status().WithContext(what));
  const std::vector<perf::SweepRow>& rows = *swept;
  const std::string device_desc = engines[0]->DeviceDescription();
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  // On the CPU: the instruction set that ran and its fp32 FMA peak on the same threads,
  // measured now, so that prefill reads as a fraction of what the machine can do.
  const bool cpu = flags->engine.device == "cpu";
  const int peak_threads = args.engine.threads > 0
                               ? args.engine.threads
                               : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const kernels::Impl isa = perf::ActiveCpuIsa();
  double peak_gflops = 0;
  if (cpu) {
    progress.Update("measuring the fp32 FMA peak (%s)...", kernels::CpuIsaPathName(isa));
    peak_gflops = perf::MeasureFmaPeakGflops(isa, peak_threads);
    progress.Done();
  }
  const double flops_per_token = perf::CostOf(*loaded->model).flops_per_prefill_token;
  auto prefill_gflops = [&](const perf::Timing& t) {
    return t.prefill_tps * flops_per_token / 1e9;
  };

  if (args.json) {
    nlohmann::ordered_json j;
    j["command"] = "bench throughput";
    j["model"] = loaded->dir;
    j["architecture"] = config.architecture;
    j["device"] = device_desc;
    j["numerics_version"] = kernels::kNumericsVersion;
    j["prompt_len"] = args.prompt_len;
    j["decode_tokens"] = args.decode_tokens;
    j["repeat"] = args.repeat;
    if (cpu) {
      j["cpu_isa"] = kernels::CpuIsaPathName(isa);
      j["threads"] = peak_threads;
      j["fma_peak_gflops"] = peak_gflops;
    }
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      nlohmann::ordered_json e;
      e["batch"] = r.batch;
      for (int m = 0; m < 2; ++m) {
        e[kernels::NumericsName(modes[m])] = {{"prefill_tokens_per_s", r.t[m].prefill_tps},
                                              {"decode_tokens_per_s", r.t[m].decode_tps},
                                              {"prefill_seconds", r.t[m].prefill_seconds},
                                              {"decode_seconds", r.t[m].decode_seconds}};
      }
      e["prefill_ratio"] = ratio(r.t[0].prefill_tps, r.t[1].prefill_tps);
      e["canonical_prefill_gflops"] = prefill_gflops(r.t[0]);
      if (cpu) e["canonical_prefill_fraction_of_peak"] = ratio(prefill_gflops(r.t[0]), peak_gflops);
      e["decode_ratio"] = ratio(r.t[0].decode_tps, r.t[1].decode_tps);
      list.push_back(e);
    }
    j["rows"] = list;
    PrintJson(std::cout, j, -1);
    return kExitOk;
  }
  std::printf("model   %s (%s), %s\n", loaded->dir.c_str(), config.architecture.c_str(),
              device_desc.c_str());
  std::printf(
      "shape   prefill %d tokens per sequence in one forward; decode %d steps; "
      "best of %d; tokens/s of the forward pass\n\n",
      args.prompt_len, args.decode_tokens, args.repeat);
  std::printf("%6s | %-35s | %-35s\n", "", "prefill tokens/s", "decode tokens/s");
  std::printf("%6s | %13s %13s %7s | %13s %13s %7s\n", "batch", "canonical", "fast", "c/f",
              "canonical", "fast", "c/f");
  for (const auto& r : rows) {
    std::printf("%6lld | %13.1f %13.1f %7.3f | %13.1f %13.1f %7.3f\n",
                static_cast<long long>(r.batch), r.t[0].prefill_tps, r.t[1].prefill_tps,
                ratio(r.t[0].prefill_tps, r.t[1].prefill_tps), r.t[0].decode_tps, r.t[1].decode_tps,
                ratio(r.t[0].decode_tps, r.t[1].decode_tps));
  }
  if (cpu) {
    std::printf("\nisa     %s, fp32 FMA peak %.1f GFLOP/s on %d thread(s), measured in this run\n",
                kernels::CpuIsaPathName(isa), peak_gflops, peak_threads);
    for (const auto& r : rows) {
      std::printf(
          "        batch %lld: canonical prefill %.1f GFLOP/s of layer matmuls = %.1f%% of "
          "the peak\n",
          static_cast<long long>(r.batch), prefill_gflops(r.t[0]),
          100 * ratio(prefill_gflops(r.t[0]), peak_gflops));
    }
  }
  return kExitOk;
}

}  // namespace trace::cli::cmd_bench_throughput
