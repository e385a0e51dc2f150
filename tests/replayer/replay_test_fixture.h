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

#include "tests/replayer/replay_test_util.h"

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

}  // namespace trace::replayer::testing
