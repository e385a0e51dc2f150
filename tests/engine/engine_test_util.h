// Helpers for the engine tests: temporary folders and seeded models written by InitModel.
// Ownership: a TempDir owns its folder and removes it. Thread safety: single-threaded tests.
// Errors: helpers fail the running test (gtest ASSERT) rather than returning Status.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_init.h"
#include "testkit/temp_dir.h"

namespace trace::engine::testing {

using ::trace::testing::TempDir;

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::shared_ptr<const Model> LoadOrDie(const std::string& dir) {
  auto model = Model::Load(dir, /*hash_weights=*/false);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? *model : nullptr;
}

inline std::unique_ptr<Engine> EngineOrDie(std::shared_ptr<const Model> model,
                                           kernels::Numerics numerics, kernels::Impl impl,
                                           int threads) {
  EngineOptions options;
  options.numerics = numerics;
  options.impl = impl;
  options.threads = threads;
  options.max_context = 1024;
  auto engine = Engine::Create(std::move(model), options);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

inline std::vector<int32_t> RandomTokens(std::mt19937_64* rng, size_t n, int32_t vocab) {
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = dist(*rng);
  return t;
}

// Feeds `tokens` to a new sequence in chunks of `chunk` (0: one pass), asking the logits at
// every position; returns them [n, vocab].
inline std::vector<float> AllLogits(Engine* engine, const std::vector<int32_t>& tokens,
                                    size_t chunk) {
  SeqId seq = engine->NewSequence();
  if (chunk == 0) chunk = tokens.size();
  std::vector<float> all;
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    size_t n = std::min(chunk, tokens.size() - begin);
    BatchItem item;
    item.seq = seq;
    item.tokens = std::span<const int32_t>(tokens.data() + begin, n);
    for (size_t i = 0; i < n; ++i) item.logits_at.push_back(static_cast<int32_t>(i));
    ForwardOutput out;
    Status st = engine->Forward(std::span<const BatchItem>(&item, 1), &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    all.insert(all.end(), out.logits.begin(), out.logits.end());
  }
  engine->FreeSequence(seq);
  return all;
}

// Bits of a float vector, for bitwise EXPECT_EQ with readable failures.
inline std::vector<uint32_t> Bits(std::span<const float> v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size_bytes());
  return bits;
}

// What a run of the `trace` binary printed and returned.
struct Ran {
  int exit_code = -1;
  std::string out, err;
};

// Runs build/bin/trace with `args` (a shell word list), stderr captured through a file in
// `scratch`. Needs TRACE_BINARY_DIR (set for every test by tests/CMakeLists.txt).
inline Ran RunTrace(const std::string& args, const std::string& scratch) {
  const std::string err_path = scratch + "/stderr.txt";
  const std::string cmd = std::string(TRACE_BINARY_DIR) + "/bin/trace " + args + " 2>" + err_path;
  Ran r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ReadAll(err_path);
  return r;
}

}  // namespace trace::engine::testing
