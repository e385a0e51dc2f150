// verify_bench: `trace verify` throughput with 1, 2 and 4 local workers, in one run (ratios
// against 1 worker, measured in the same run: docs/verify.md "Throughput").
//
//   verify_bench [--runs N] [--tokens N] [--store LOC] [--trace PATH] [--repeat N]
//
// Writes N runs (default 120) of the scripted agent (two model calls each, --tokens sampled
// tokens per call, default 8) on two tiny seeded models into a fresh SQLite store (or the
// store LOC, e.g. a postgresql:// URL of an empty database), then times `trace verify
// --workers W` over all of them for W = 1, 2, 4 (each worker one engine thread), --repeat
// times each (default 3, the median kept). Prints runs verified per minute per W and the
// ratio to W = 1. Each worker loads each model once (its engine cache), so the first run of
// a model costs its load and the rest only their replay.
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/model_init.h"
#include "testkit/replay_test_util.h"
#include "testkit/shell.h"

using namespace trace;

namespace {

int WriteRuns(const std::string& store_loc, const std::vector<std::string>& models, int n,
              int tokens) {
  auto store = store::Store::Open(store_loc);
  if (!store.ok()) {
    std::fprintf(stderr, "verify_bench: %s\n", store.status().message().c_str());
    return 1;
  }
  for (size_t m = 0; m < models.size(); ++m) {
    auto model = engine::Model::Load(models[m]);
    engine::EngineOptions eo;
    eo.threads = 1;
    auto eng = model.ok() ? engine::Engine::Create(*model, eo)
                          : Result<std::unique_ptr<engine::Engine>>(model.status());
    auto tok = engine::Tokenizer::Load(models[m] + "/tokenizer.json");
    if (!eng.ok() || !tok.ok()) {
      std::fprintf(stderr, "verify_bench: cannot load %s\n", models[m].c_str());
      return 1;
    }
    for (int i = static_cast<int>(m); i < n; i += static_cast<int>(models.size())) {
      replayer::testing::AgentInputs in;
      in.seed = 500 + static_cast<uint64_t>(i);
      in.user_name = "user" + std::to_string(i);
      in.max_tokens = tokens;
      auto run = replayer::testing::RunScriptedAgent(**eng, **tok, in);
      auto id =
          run.ok() ? replayer::testing::WriteRun(**store, *run) : Result<std::string>(run.status());
      if (!id.ok()) {
        std::fprintf(stderr, "verify_bench: %s\n", id.status().message().c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 120, tokens = 8, repeat = 3;
  std::string store_loc, trace_bin = std::string(TRACE_BINARY_DIR) + "/bin/trace";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--runs") {
      runs = std::atoi(next().c_str());
    } else if (a == "--tokens") {
      tokens = std::atoi(next().c_str());
    } else if (a == "--store") {
      store_loc = next();
    } else if (a == "--trace") {
      trace_bin = next();
    } else if (a == "--repeat") {
      repeat = std::atoi(next().c_str());
    } else {
      std::fprintf(stderr,
                   "usage: verify_bench [--runs N] [--tokens N] [--store LOC] [--trace PATH] "
                   "[--repeat N]\n");
      return 2;
    }
  }
  if (runs < 4 || tokens < 1 || repeat < 1) {
    std::fprintf(stderr, "verify_bench: --runs >= 4, --tokens >= 1, --repeat >= 1\n");
    return 2;
  }
  trace::testing::TempDir dir;
  const std::vector<std::string> models = {dir.file("dense"), dir.file("moe")};
  if (!engine::InitModel("tiny", 3, models[0]).ok() ||
      !engine::InitModel("qwen3-moe-tiny", 4, models[1]).ok()) {
    std::fprintf(stderr, "verify_bench: cannot write the models\n");
    return 1;
  }
  if (store_loc.empty()) store_loc = dir.file("store.db");
  if (WriteRuns(store_loc, models, runs, tokens) != 0) return 1;

  std::printf("verify_bench: %d runs (2 calls x %d tokens, 2 models), median of %d\n", runs, tokens,
              repeat);
  std::printf("%8s %12s %14s %10s\n", "workers", "seconds", "runs/minute", "vs 1");
  double base = 0;
  for (int workers : {1, 2, 4}) {
    std::vector<double> secs;
    for (int r = 0; r < repeat; ++r) {
      const std::string cmd = trace::testing::ShellQuote(trace_bin) + " --quiet --store " +
                              trace::testing::ShellQuote(store_loc) + " verify --workers " +
                              std::to_string(workers) + " --threads 1 > /dev/null";
      const auto t0 = std::chrono::steady_clock::now();
      const int status = std::system(cmd.c_str());
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "verify_bench: `%s` failed (%d)\n", cmd.c_str(), status);
        return 1;
      }
    }
    std::sort(secs.begin(), secs.end());
    const double s = secs[secs.size() / 2];
    const double per_minute = runs * 60.0 / s;
    if (workers == 1) base = per_minute;
    std::printf("%8d %12.2f %14.0f %9.2fx\n", workers, s, per_minute, per_minute / base);
  }
  return 0;
}
