// engine_bench: the cost of canonical numerics on the CPU engine, measured against the fast
// baseline in the same run, and the memory of a long context.
//
//   engine_bench [--model DIR] [--threads N] [--decode N] [--prefill N] [--context N]
//
// Without --model it writes the qwen2.5-0.5b preset (seed 1) to $TMPDIR once and reuses it.
// Throughput: prefill tokens/s (one sequence of --prefill tokens), decode tokens/s at batch 1
// and at batch 8 (--decode steps after a 32-token prompt each), for canonical and fast;
// figures are reported as the ratio canonical / fast. Memory: a child process loads the
// model, fills one sequence to --context tokens and decodes 4 more; its peak RSS is
// compared with the size of the weights (target <= 1.3x at 4096).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_init.h"

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
                                           kernels::Numerics numerics, int threads,
                                           int64_t context) {
  engine::EngineOptions options;
  options.numerics = numerics;
  options.threads = threads;
  options.max_context = context;
  auto engine = engine::Engine::Create(std::move(model), options);
  Check(engine.status());
  return std::move(engine).value();
}

struct Figures {
  double prefill = 0, decode1 = 0, decode8 = 0;  // tokens/s
};

Figures Throughput(std::shared_ptr<const engine::Model> model, kernels::Numerics numerics,
                   const Options& opt) {
  Figures f;
  const int64_t vocab = model->config().vocab_size;
  auto engine = MakeEngine(model, numerics, opt.threads, opt.prefill + opt.decode + 64);
  std::mt19937_64 rng(1);
  engine::ForwardOutput out;
  {  // prefill
    auto tokens = Tokens(&rng, opt.prefill, vocab);
    engine::SeqId seq = engine->NewSequence();
    engine::BatchItem item{seq, tokens, {opt.prefill - 1}};
    auto start = Clock::now();
    Check(engine->Forward(std::span<const engine::BatchItem>(&item, 1), &out));
    f.prefill = opt.prefill / Seconds(start);
    engine->FreeSequence(seq);
  }
  for (int batch : {1, 8}) {
    std::vector<engine::SeqId> seqs;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<engine::BatchItem> items;
    for (int b = 0; b < batch; ++b) {
      seqs.push_back(engine->NewSequence());
      prompts.push_back(Tokens(&rng, 32, vocab));
    }
    for (int b = 0; b < batch; ++b) items.push_back({seqs[b], prompts[b], {31}});
    Check(engine->Forward(items, &out));
    std::vector<int32_t> next(batch);
    auto start = Clock::now();
    for (int step = 0; step < opt.decode; ++step) {
      items.clear();
      for (int b = 0; b < batch; ++b) {
        next[b] = static_cast<int32_t>(rng() % 150000);
        items.push_back({seqs[b], std::span<const int32_t>(&next[b], 1), {0}});
      }
      Check(engine->Forward(items, &out));
    }
    double tps = static_cast<double>(batch) * opt.decode / Seconds(start);
    (batch == 1 ? f.decode1 : f.decode8) = tps;
    for (auto s : seqs) engine->FreeSequence(s);
  }
  return f;
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
    else {
      std::fprintf(stderr, "engine_bench: unknown argument %s\n", a.c_str());
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

  auto loaded = engine::Model::Load(opt.model, /*hash_weights=*/false);
  Check(loaded.status());
  std::shared_ptr<const engine::Model> model = std::move(loaded).value();
  const auto& c = model->config();
  std::printf("model %s: %s, %lld layers, hidden %lld, %.0f MB weights; threads %d\n",
              opt.model.c_str(), c.architecture.c_str(), static_cast<long long>(c.num_layers),
              static_cast<long long>(c.hidden_size), model->weights().bytes / 1e6, opt.threads);
  Figures canonical = Throughput(model, kernels::Numerics::kCanonical, opt);
  Figures fast = Throughput(model, kernels::Numerics::kFast, opt);
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
  return 0;
}
