// engine_bench: the CPU engine's speed and memory. What it measures and how to call it is
// kUsage below, which --help prints.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/model_init.h"
#include "perf/machine_peak.h"
#include "perf/throughput.h"

namespace {

using namespace trace;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string model;
  int threads = 0;
  int decode = 16;
  int prefill = 128;
  int context = 4096;
  bool memory_child = false;
  bool skip_speed_of_light = false;
  bool once = false;
  int repeat = 3;
};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::vector<int32_t> Tokens(std::mt19937_64* rng, size_t n, int64_t vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>((*rng)() % 150000 % vocab);
  return t;
}

void Check(const Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "engine_bench: %s\n", st.ToString().c_str());
    std::exit(2);
  }
}

std::unique_ptr<engine::Engine> MakeEngine(std::shared_ptr<const engine::Model> model,
                                           kernels::Numerics numerics, int threads, int64_t context,
                                           kernels::Impl impl = kernels::Impl::kAuto) {
  engine::EngineOptions options;
  options.numerics = numerics;
  options.impl = impl;
  options.threads = threads;
  options.max_context = context;
  auto engine = engine::Engine::Create(std::move(model), options);
  Check(engine.status());
  return std::move(engine).value();
}

struct Figures {
  double prefill = 0, decode1 = 0, decode8 = 0;  // tokens/s
};

// Canonical and fast through perf::RunThroughputSweep (the sweep of `trace bench
// throughput`: both engines alternately, so drifting load hits both): one sequence of
// --prefill tokens then --decode steps at batch 1, and 8 sequences of 32 tokens then --decode
// steps at batch 8. Returns {canonical, fast}.
std::array<Figures, 2> Throughput(std::shared_ptr<const engine::Model> model, const Options& opt) {
  const int64_t context = opt.prefill + opt.decode + 64;
  auto canonical = MakeEngine(model, kernels::Numerics::kCanonical, opt.threads, context);
  auto fast = MakeEngine(model, kernels::Numerics::kFast, opt.threads, context);
  std::array<Figures, 2> f;
  const int64_t vocab = std::min<int64_t>(model->config().vocab_size, 150000);
  for (int batch : {1, 8}) {
    perf::SweepOptions sweep;
    sweep.batches = {batch};
    sweep.prompt_len = batch == 1 ? opt.prefill : 32;
    sweep.decode_tokens = opt.decode;
    sweep.seed = 1;
    auto rows = perf::RunThroughputSweep({canonical.get(), fast.get()}, sweep, vocab, nullptr);
    Check(rows.status());
    for (int m = 0; m < 2; ++m) {
      const perf::Timing& t = (*rows)[0].t[m];
      if (batch == 1) {
        f[static_cast<size_t>(m)].prefill = t.prefill_tps;
        f[static_cast<size_t>(m)].decode1 = t.decode_tps;
      } else {
        f[static_cast<size_t>(m)].decode8 = t.decode_tps;
      }
    }
  }
  return f;
}

// Canonical prefill and decode on each SIMD path and thread count, against the machine's
// measured FMA peak and memory bandwidth, all in this run (the ratios are the result).
struct PathRun {
  kernels::Impl isa;
  int threads;
  double prefill_tps = 0, decode_tps = 0;
  double peak_gflops = 0;
  double prefill_cpu_seconds = 1e30;  // process CPU time of the best prefill
};

void SpeedOfLight(std::shared_ptr<const engine::Model> model, const Options& opt) {
  const int max_threads = opt.threads > 0 ? opt.threads : 2;
  const perf::ModelCost cost = perf::CostOf(*model);
  const int64_t vocab = model->config().vocab_size;
  std::vector<int> thread_counts = {1};
  if (max_threads > 1) thread_counts.push_back(max_threads);
  std::vector<PathRun> runs;
  for (kernels::Impl isa : kernels::AvailableCpuIsaPaths()) {
    if (isa == kernels::Impl::kReference) continue;
    for (int threads : thread_counts) runs.push_back({isa, threads});
  }
  perf::Rng rng(7);
  std::vector<int32_t> prompt(static_cast<size_t>(opt.prefill));
  for (auto& t : prompt) t = static_cast<int32_t>(rng.Uniform(0, vocab - 1));
  std::vector<int32_t> short_prompt(prompt.begin(), prompt.begin() + std::min(8, opt.prefill));
  // Best of two rounds, the paths interleaved within a round so that load drift hits all.
  std::vector<std::unique_ptr<engine::Engine>> engines;
  for (PathRun& r : runs) {
    engines.push_back(MakeEngine(model, kernels::Numerics::kCanonical, r.threads,
                                 opt.prefill + opt.decode + 16, r.isa));
    perf::Timing warm;
    Check(perf::Measure(engines.back().get(), {short_prompt}, 2, &warm));
  }
  // Each path's peak is measured right beside its prefill and decode, and the bandwidths
  // once per round, so that a ratio compares figures taken under the same load.
  perf::Bandwidth bw1, bwn;
  auto keep_best = [](perf::Bandwidth* best, const perf::Bandwidth& now) {
    best->copy_gbps = std::max(best->copy_gbps, now.copy_gbps);
    best->read_gbps = std::max(best->read_gbps, now.read_gbps);
  };
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < runs.size(); ++i) {
      perf::Timing prefill, decode;
      const double peak_before = perf::MeasureFmaPeakGflops(runs[i].isa, runs[i].threads, 2);
      const double cpu0 = perf::ProcessCpuSeconds();
      Check(perf::Measure(engines[i].get(), {prompt}, 0, &prefill));
      runs[i].prefill_cpu_seconds =
          std::min(runs[i].prefill_cpu_seconds, perf::ProcessCpuSeconds() - cpu0);
      Check(perf::Measure(engines[i].get(), {short_prompt}, opt.decode, &decode));
      const double peak_after = perf::MeasureFmaPeakGflops(runs[i].isa, runs[i].threads, 2);
      runs[i].prefill_tps = std::max(runs[i].prefill_tps, prefill.prefill_tps);
      runs[i].decode_tps = std::max(runs[i].decode_tps, decode.decode_tps);
      runs[i].peak_gflops = std::max({runs[i].peak_gflops, peak_before, peak_after});
    }
    keep_best(&bw1, perf::MeasureBandwidth(1));
    keep_best(&bwn, perf::MeasureBandwidth(max_threads));
  }
  engines.clear();
  // Per-core figures from CPU time, which time slices lost to other processes do not change.
  double core_peak[4] = {0, 0, 0, 0};  // by Impl
  for (const PathRun& r : runs) {
    double& p = core_peak[static_cast<int>(r.isa)];
    if (p == 0) p = perf::MeasureFmaPeakGflopsPerCpuSecond(r.isa);
  }
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);

  std::printf("\nspeed of light (canonical, %s weights; load average %.1f on %u CPUs)\n",
              kernels::DTypeName(model->weights().lm_head.dtype), load[0],
              std::thread::hardware_concurrency());
  std::printf("memory: copy %.1f GB/s (1 thread), %.1f GB/s (%d); read %.1f / %.1f GB/s\n",
              bw1.copy_gbps, bwn.copy_gbps, max_threads, bw1.read_gbps, bwn.read_gbps);
  std::printf("%-10s %3s | %9s %9s %9s %8s | %9s %9s %8s %8s\n", "path", "thr", "prefill/s",
              "GFLOP/s", "peak", "of peak", "decode/s", "GB/s", "of copy", "of read");
  auto bw_of = [&](int threads) { return threads == 1 ? bw1 : bwn; };
  for (const PathRun& r : runs) {
    const double gflops = r.prefill_tps * cost.flops_per_prefill_token / 1e9;
    const double gbps = r.decode_tps * cost.bytes_per_decode_step / 1e9;
    std::printf("%-10s %3d | %9.1f %9.1f %9.1f %7.1f%% | %9.2f %9.2f %7.1f%% %7.1f%%\n",
                kernels::CpuIsaPathName(r.isa), r.threads, r.prefill_tps, gflops, r.peak_gflops,
                100 * gflops / r.peak_gflops, r.decode_tps, gbps,
                100 * gbps / bw_of(r.threads).copy_gbps, 100 * gbps / bw_of(r.threads).read_gbps);
  }
  std::printf(
      "per core, from process CPU time (load-independent): prefill GFLOP per CPU-second "
      "/ the per-core FMA peak\n");
  for (const PathRun& r : runs) {
    const double per_cpu_s =
        opt.prefill * cost.flops_per_prefill_token / r.prefill_cpu_seconds / 1e9;
    const double peak = core_peak[static_cast<int>(r.isa)];
    std::printf("  %-8s x%d: %.1f GFLOP/CPU-s of a %.1f GFLOP/CPU-s peak = %.1f%%\n",
                kernels::CpuIsaPathName(r.isa), r.threads, per_cpu_s, peak, 100 * per_cpu_s / peak);
  }
  auto find = [&](kernels::Impl isa, int threads) -> const PathRun* {
    for (const PathRun& r : runs) {
      if (r.isa == isa && r.threads == threads) return &r;
    }
    return nullptr;
  };
  const PathRun* a512 = find(kernels::Impl::kAvx512, max_threads);
  const PathRun* a2 = find(kernels::Impl::kAvx2, max_threads);
  if (a512 != nullptr && a2 != nullptr) {
    std::printf("avx512 / avx2 (%d threads): prefill %.2fx, decode %.2fx; FMA peak %.2fx\n",
                max_threads, a512->prefill_tps / a2->prefill_tps, a512->decode_tps / a2->decode_tps,
                a512->peak_gflops / a2->peak_gflops);
  }
  for (kernels::Impl isa : {kernels::Impl::kAvx512, kernels::Impl::kAvx2}) {
    const PathRun* one = find(isa, 1);
    const PathRun* many = find(isa, max_threads);
    if (one != nullptr && many != nullptr && many != one) {
      std::printf("%s threads %d / 1: prefill %.2fx, decode %.2fx\n", kernels::CpuIsaPathName(isa),
                  max_threads, many->prefill_tps / one->prefill_tps,
                  many->decode_tps / one->decode_tps);
    }
  }
}

// In the child: fill a context, decode a little, print peak RSS in bytes.
int MemoryChild(const Options& opt) {
  auto model = engine::Model::Load(opt.model, /*hash_weights=*/false);
  Check(model.status());
  auto engine = MakeEngine(*model, kernels::Numerics::kCanonical, opt.threads, opt.context);
  std::mt19937_64 rng(2);
  auto tokens = Tokens(&rng, opt.context - 4, (*model)->config().vocab_size);
  engine::SeqId seq = engine->NewSequence();
  engine::ForwardOutput out;
  auto start = Clock::now();
  engine::BatchItem item{seq, tokens, {static_cast<int32_t>(tokens.size() - 1)}};
  Check(engine->Forward(std::span<const engine::BatchItem>(&item, 1), &out));
  double prefill_s = Seconds(start);
  for (int step = 0; step < 4; ++step) {
    int32_t t = static_cast<int32_t>(rng() % 150000);
    engine::BatchItem one{seq, std::span<const int32_t>(&t, 1), {0}};
    Check(engine->Forward(std::span<const engine::BatchItem>(&one, 1), &out));
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("%lld %lld %.3f\n", static_cast<long long>(usage.ru_maxrss) * 1024,
              static_cast<long long>((*model)->weights().bytes), prefill_s);
  return 0;
}

// --once: one JSON line, so that a script can alternate this engine with another one.
int Once(const Options& opt) {
  auto loaded = engine::Model::Load(opt.model, /*hash_weights=*/false);
  Check(loaded.status());
  std::shared_ptr<const engine::Model> model = std::move(loaded).value();
  const int64_t vocab = std::min<int64_t>(model->config().vocab_size, 150000);
  auto engine =
      MakeEngine(model, kernels::Numerics::kCanonical, opt.threads, opt.prefill + opt.decode + 16);
  perf::Rng rng(7);
  std::vector<int32_t> prompt(static_cast<size_t>(opt.prefill)), short_prompt(8);
  for (auto& t : prompt) t = static_cast<int32_t>(rng.Uniform(0, vocab - 1));
  for (auto& t : short_prompt) t = static_cast<int32_t>(rng.Uniform(0, vocab - 1));
  perf::Timing warm;
  Check(perf::Measure(engine.get(), {short_prompt}, 2, &warm));
  std::vector<double> prefill, decode, prefill_cpu;  // tokens/s; process CPU-s per prefill
  for (int r = 0; r < opt.repeat; ++r) {
    perf::Timing t;
    if (opt.prefill > 0) {
      const double cpu0 = perf::ProcessCpuSeconds();
      Check(perf::Measure(engine.get(), {prompt}, 0, &t));
      prefill_cpu.push_back(perf::ProcessCpuSeconds() - cpu0);
      prefill.push_back(t.prefill_tps);
    }
    if (opt.decode > 0) {
      Check(perf::Measure(engine.get(), {short_prompt}, opt.decode, &t));
      decode.push_back(t.decode_tps);
    }
  }
  auto list = [](const std::vector<double>& v) {
    std::string s = "[";
    double sum = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%s%.3f", i ? ", " : "", v[i]);
      s += buf;
      sum += v[i];
    }
    char mean[48];
    std::snprintf(mean, sizeof(mean), "%.3f", v.empty() ? 0.0 : sum / v.size());
    return std::make_pair(std::string(mean), s + "]");
  };
  const auto [prefill_mean, prefill_all] = list(prefill);
  const auto [decode_mean, decode_all] = list(decode);
  const auto [cpu_mean, cpu_all] = list(prefill_cpu);
  std::printf(
      "{\"isa\": \"%s\", \"threads\": %d, \"prefill_tokens\": %d, \"decode_tokens\": %d, "
      "\"prefill_tps\": %s, \"decode_tps\": %s, \"prefill_cpu_seconds\": %s, "
      "\"prefill_runs\": %s, \"decode_runs\": %s}\n",
      kernels::CpuIsaPathName(kernels::Impl::kAuto), opt.threads, opt.prefill, opt.decode,
      prefill_mean.c_str(), decode_mean.c_str(), cpu_mean.c_str(), prefill_all.c_str(),
      decode_all.c_str());
  return 0;
}

constexpr const char* kUsage =
    R"(engine_bench: the cost of canonical numerics on the CPU engine, measured against
the fast baseline in the same run, and the memory of a long context.

  engine_bench [--model DIR] [--threads N] [--decode N] [--prefill N] [--context N]
               [--no-speed-of-light]
  engine_bench --once [--model DIR] [--threads N] [--prefill N] [--decode N] [--repeat N]

Without --model it writes the qwen2.5-0.5b preset (seed 1) under $TMPDIR once and reuses it.
Throughput (shared with `trace bench throughput`): prefill tokens/s (one sequence of
--prefill tokens), decode tokens/s at batch 1 (--decode steps after it) and at batch 8
(--decode steps after a 32-token prompt each), canonical and fast alternately, reported as
the ratio canonical / fast. Memory: a child process loads the model, fills one sequence to
--context tokens and decodes 4 more; its peak RSS against the size of the weights (target
<= 1.3x at 4096). Speed of light (skip with --no-speed-of-light): canonical prefill and
batch-1 decode on each SIMD path (AVX-512, AVX2) at 1 and --threads threads, as GFLOP/s
against the fp32 FMA peak measured for that path and thread count, and as weight bytes/s
against a copy and a read bandwidth measured in the same run; plus the ratios AVX-512 / AVX2
and threads N / 1.
--once (for scripts that pair it with another run: bench/engine/thread_scaling.py,
bench/llama_cpp/compare.sh): canonical numerics on the best ISA path (TRACE_CPU_ISA caps it),
one warm-up, then --repeat times a prefill of --prefill tokens on a fresh sequence and,
separately, --decode steps at batch 1 after an 8-token prompt (0 skips either); prints one
JSON line with the mean tokens/s, the process CPU seconds of a prefill (idle workers spin at
most ~100 us between calls before they sleep, so CPU time is close to the work done whatever
the load) and every repetition's tokens/s.
)";

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "engine_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model")
      opt.model = next();
    else if (a == "--threads")
      opt.threads = std::atoi(next());
    else if (a == "--decode")
      opt.decode = std::atoi(next());
    else if (a == "--prefill")
      opt.prefill = std::atoi(next());
    else if (a == "--context")
      opt.context = std::atoi(next());
    else if (a == "--memory-child")
      opt.memory_child = true;
    else if (a == "--no-speed-of-light")
      opt.skip_speed_of_light = true;
    else if (a == "--once")
      opt.once = true;
    else if (a == "--repeat")
      opt.repeat = std::max(1, std::atoi(next()));
    else if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else {
      std::fprintf(stderr, "engine_bench: unknown argument %s (--help lists them)\n", a.c_str());
      return 2;
    }
  }
  if (opt.model.empty()) {
    std::error_code ec;
    std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    if (ec) tmp = "/tmp";
    opt.model = (tmp / "trace-bench-qwen2.5-0.5b-seed1").string();
    if (!std::filesystem::exists(opt.model + "/config.json", ec)) {
      std::fprintf(stderr, "writing the qwen2.5-0.5b preset to %s ...\n", opt.model.c_str());
      Check(engine::InitModel("qwen2.5-0.5b", 1, opt.model));
    }
  }
  if (opt.memory_child) return MemoryChild(opt);
  if (opt.once) return Once(opt);

  auto loaded = engine::Model::Load(opt.model, /*hash_weights=*/false);
  Check(loaded.status());
  std::shared_ptr<const engine::Model> model = std::move(loaded).value();
  const auto& c = model->config();
  std::printf("model %s: %s, %lld layers, hidden %lld, %.0f MB weights; threads %d\n",
              opt.model.c_str(), c.architecture.c_str(), static_cast<long long>(c.num_layers),
              static_cast<long long>(c.hidden_size), model->weights().bytes / 1e6, opt.threads);
  const auto [canonical, fast] = Throughput(model, opt);
  std::printf("%-22s %12s %12s %10s\n", "tokens/s", "canonical", "fast", "ratio");
  auto row = [](const char* name, double a, double b) {
    std::printf("%-22s %12.2f %12.2f %9.2fx\n", name, a, b, a / b);
  };
  row(("prefill " + std::to_string(opt.prefill)).c_str(), canonical.prefill, fast.prefill);
  row("decode batch 1", canonical.decode1, fast.decode1);
  row("decode batch 8", canonical.decode8, fast.decode8);
  model.reset();  // release the mapping before the memory child
  std::fflush(stdout);

  // Memory in a fresh process, so the figures above do not count.
  int pipefd[2];
  if (pipe(pipefd) != 0) return 2;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], STDOUT_FILENO);
    close(pipefd[0]);
    std::string context = std::to_string(opt.context), threads = std::to_string(opt.threads);
    execl("/proc/self/exe", "engine_bench", "--memory-child", "--model", opt.model.c_str(),
          "--context", context.c_str(), "--threads", threads.c_str(), nullptr);
    _exit(127);
  }
  close(pipefd[1]);
  char buf[256] = {};
  ssize_t n = read(pipefd[0], buf, sizeof(buf) - 1);
  int status = 0;
  waitpid(pid, &status, 0);
  long long rss = 0, weights = 0;
  double prefill_s = 0;
  if (n <= 0 || std::sscanf(buf, "%lld %lld %lf", &rss, &weights, &prefill_s) != 3) {
    std::fprintf(stderr, "engine_bench: the memory child failed (status %d)\n", status);
    return 2;
  }
  std::printf(
      "peak RSS at %d context, batch 1: %.0f MB = %.3fx the weights (%.0f MB); "
      "prefill of %d tokens took %.1f s\n",
      opt.context, rss / 1e6, static_cast<double>(rss) / weights, weights / 1e6, opt.context - 4,
      prefill_s);
  // After the memory child: a child forked from a process that has run several engines
  // would inherit their high-water RSS.
  if (!opt.skip_speed_of_light) {
    auto again = engine::Model::Load(opt.model, /*hash_weights=*/false);
    Check(again.status());
    SpeedOfLight(std::move(again).value(), opt);
  }
  return 0;
}
