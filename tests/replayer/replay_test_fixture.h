// gtest helpers shared by the replay tests (not by the benchmarks, which also include
// replay_test_util.h): a CPU engine over a model folder, and the `trace` binary run as a user
// runs it.
// Ownership: callers own what is returned. Thread safety: single-threaded tests. Errors:
// MakeEngine fails the running test (EXPECT) and returns null; RunTraceBinary returns -1
// when the command cannot be started.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <string>

#include "store/store.h"
#include "testkit/replay_test_util.h"

#ifndef TRACE_BINARY_DIR
#error "tests/CMakeLists.txt defines TRACE_BINARY_DIR for every test"
#endif

namespace trace::replayer::testing {

// A CPU engine (2 threads) over the model in `dir`, weights hashed as `trace record` does.
inline std::unique_ptr<engine::Engine> MakeEngine(const std::string& dir) {
  auto model = engine::Model::Load(dir, /*hash_weights=*/true);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return nullptr;
  engine::EngineOptions options;
  options.threads = 2;
  auto engine = engine::Engine::Create(*model, options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Runs build/bin/trace with `args` (a shell word list); returns the exit status, stdout in
// *out, stderr (through `scratch`/stderr.txt) in *err.
inline int RunTraceBinary(const std::string& args, const std::string& scratch, std::string* out,
                          std::string* err) {
  const std::string err_file = scratch + "/stderr.txt";
  const std::string cmd = std::string(TRACE_BINARY_DIR) + "/bin/trace " + args + " 2>" + err_file;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  out->clear();
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out->append(buf, n);
  const int status = pclose(pipe);
  *err = ReadAll(err_file);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Records examples/support_agent with `trace record` on the model in `model_dir` into the
// new store `db`, and puts the one run's summary in *run (fails the running test otherwise;
// call it under ASSERT_NO_FATAL_FAILURE).
inline void RecordExampleAgent(const std::string& db, const std::string& model_dir, int turns,
                               int max_tokens, const std::string& scratch, store::RunSummary* run,
                               const std::string& record_flags = "") {
  const std::string agent = std::string(TRACE_SOURCE_DIR) + "/examples/support_agent/agent.py";
  std::string out, err;
  const int rc =
      RunTraceBinary("--store " + db + " -q record --model " + model_dir + " " + record_flags +
                         " -- python3 " + agent + " --turns " + std::to_string(turns) +
                         " --max-tokens " + std::to_string(max_tokens),
                     scratch, &out, &err);
  ASSERT_EQ(rc, 0) << err << out;
  auto store = store::Store::Open(db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 1u);
  ASSERT_GT((*runs)[0].model_calls, 0);
  *run = (*runs)[0];
}

}  // namespace trace::replayer::testing
