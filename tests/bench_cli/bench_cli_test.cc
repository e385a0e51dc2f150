// End-to-end: `trace bench determinism` and `trace bench throughput` on the tiny preset.
// Canonical numerics must give exactly one distinct completion and logits bitwise equal to
// batch size 1; the JSON output must be self-consistent; bad input is one line, exit 2.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "kernels/kernels.h"
#include "testkit/temp_dir.h"

namespace {

struct Ran {
  int exit_code = -1;
  std::string out, err;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using ::trace::testing::TempDir;
namespace kernels = ::trace::kernels;

// Runs `env trace args` with stdout captured and stderr in a file.
Ran RunTrace(const std::string& args, const std::string& scratch, const std::string& env = "") {
  const std::string err_path = scratch + "/stderr.txt";
  const std::string cmd =
      env + " " + std::string(TRACE_BINARY_DIR) + "/bin/trace " + args + " 2>" + err_path;
  Ran r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ReadAll(err_path);
  return r;
}

size_t Lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n + (!s.empty() && s.back() != '\n');
}

class BenchCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    model_ = tmp_->path() + "/tiny";
    Ran init = RunTrace("model init --preset tiny --seed 7 " + model_, tmp_->path());
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(model_ + "/config.json")); }
  Ran Bench(const std::string& args) { return RunTrace("bench " + args, scratch_.path()); }
  static TempDir* tmp_;
  static std::string model_;
  TempDir scratch_;
};
TempDir* BenchCliTest::tmp_ = nullptr;
std::string BenchCliTest::model_;

// Counts and run indices in a determinism report add up.
void ExpectConsistent(const nlohmann::json& j, int runs) {
  ASSERT_EQ(j["runs"].get<int>(), runs);
  const auto& completions = j["completions"];
  ASSERT_EQ(j["distinct_completions"].get<size_t>(), completions.size());
  ASSERT_GE(completions.size(), 1u);
  std::set<int> seen;
  int total = 0;
  for (const auto& c : completions) {
    EXPECT_EQ(c["count"].get<size_t>(), c["runs"].size());
    EXPECT_EQ(c["first_run"].get<int>(), c["runs"][0].get<int>());
    total += c["count"].get<int>();
    for (const auto& r : c["runs"]) EXPECT_TRUE(seen.insert(r.get<int>()).second);
  }
  EXPECT_EQ(total, runs);
  EXPECT_EQ(seen.size(), static_cast<size_t>(runs));
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), runs - 1);
  EXPECT_EQ(j["divergences"].size(), completions.size() - 1);
  for (const auto& d : j["divergences"]) {
    EXPECT_GE(d["step"].get<int>(), 0);
    EXPECT_EQ(d["base_run"].get<int>(), completions[0]["first_run"].get<int>());
  }
  int64_t steps = 0;
  int64_t first_steps = 0;
  for (const auto& b : j["logits_vs_batch1"]) {
    EXPECT_GE(b["batch_size"].get<int>(), 1);
    EXPECT_LE(b["batch_size"].get<int>(), j["max_others"].get<int>() + 1);
    steps += b["steps"].get<int64_t>();
    first_steps += b["first_steps"].get<int64_t>();
  }
  EXPECT_EQ(first_steps, runs);  // every run has exactly one first step
  EXPECT_GE(steps, runs);
}

TEST_F(BenchCliTest, CanonicalGivesOneCompletionAndBitwiseEqualLogits) {
  Ran r = Bench("determinism --model " + model_ +
                " --numerics canonical --runs 8 --max-tokens 8 --max-others 6 --seed 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ExpectConsistent(j, 8);
  EXPECT_EQ(j["numerics"], "canonical");
  EXPECT_EQ(j["distinct_completions"].get<int>(), 1);
  EXPECT_TRUE(j["completions"][0]["matches_reference"].get<bool>());
  EXPECT_EQ(j["max_abs_diff_first_step"].get<double>(), 0.0);
  EXPECT_EQ(j["max_abs_diff"].get<double>(), 0.0);
  EXPECT_TRUE(j["bitwise_equal"].get<bool>());
  for (const auto& b : j["logits_vs_batch1"]) {
    EXPECT_TRUE(b["bitwise_equal"].get<bool>()) << b.dump();
    EXPECT_EQ(b["max_abs_diff"].get<double>(), 0.0);
  }
  // The runs were really batched: some step ran alongside other sequences.
  EXPECT_GT(j["largest_batch"]["max"].get<int>(), 1);
  EXPECT_GT(j["logits_vs_batch1"].size(), 1u);
}

// A mixture-of-experts model: fast numerics' capacity-limited routing lets the batch move a
// sequence's expert choices (distinct completions); canonical routing gives one completion and
// logits bitwise equal to batch size 1.
TEST_F(BenchCliTest, MoeModelFastMovesWithTheBatchCanonicalDoesNot) {
  const std::string moe = tmp_->path() + "/moe";
  Ran init = RunTrace("model init --preset qwen3-moe-tiny --seed 7 " + moe, scratch_.path());
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const std::string args =
      "determinism --model " + moe + " --runs 8 --max-tokens 8 --max-others 6 --seed 3 --json";
  Ran fast = Bench(args + " --numerics fast");
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  auto f = nlohmann::json::parse(fast.out);
  ExpectConsistent(f, 8);
  EXPECT_GT(f["distinct_completions"].get<int>(), 1) << fast.out;
  EXPECT_FALSE(f["bitwise_equal"].get<bool>());
  Ran canonical = Bench(args + " --numerics canonical");
  ASSERT_EQ(canonical.exit_code, 0) << canonical.err;
  auto c = nlohmann::json::parse(canonical.out);
  ExpectConsistent(c, 8);
  EXPECT_EQ(c["distinct_completions"].get<int>(), 1) << canonical.out;
  EXPECT_TRUE(c["bitwise_equal"].get<bool>());
  EXPECT_GT(c["largest_batch"]["max"].get<int>(), 1);
}

TEST_F(BenchCliTest, TextReportNamesTheCountAndTheBatchTable) {
  Ran r = Bench("determinism --model " + model_ + " --runs 5 --max-tokens 6 --max-others 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 distinct completions out of 5 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch size 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bitwise equal"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");  // no progress noise when stderr is not a terminal
}

TEST_F(BenchCliTest, FastModeReportIsConsistentAndSeeded) {
  const std::string args = "determinism --model " + model_ +
                           " --numerics fast --runs 6 --max-tokens 6 --max-others 5 --seed 9 "
                           "--json";
  Ran a = Bench(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto j = nlohmann::json::parse(a.out);
  EXPECT_EQ(j["numerics"], "fast");
  ExpectConsistent(j, 6);
  EXPECT_TRUE(j["max_abs_diff"].is_number());  // fast on CPU: reported, whatever it is
  // The same seed builds the same batches: the same completions again.
  Ran b = Bench(args);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto k = nlohmann::json::parse(b.out);
  EXPECT_EQ(j["completions"], k["completions"]);
  EXPECT_EQ(j["largest_batch"], k["largest_batch"]);
}

// CPU fast mode is row-independent too, so divergences are provoked with the hidden
// --test-perturb hook (the runner-up wins at every step computed in a batch).
TEST_F(BenchCliTest, DivergenceReportNamesRunStepTokensAndMargins) {
  Ran r = Bench("determinism --model " + model_ +
                " --runs 8 --max-tokens 6 --max-others 6 --seed 5 --test-perturb 0.5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ExpectConsistent(j, 8);
  ASSERT_GT(j["distinct_completions"].get<int>(), 1) << r.out;
  EXPECT_FALSE(j["bitwise_equal"].get<bool>());
  EXPECT_GT(j["max_abs_diff"].get<double>(), 0.0);
  for (const auto& d : j["divergences"]) {
    const auto& base = d["base"];
    const auto& var = d["variant_step"];
    EXPECT_EQ(base["run"].get<int>(), d["base_run"].get<int>());
    EXPECT_EQ(var["run"].get<int>(), d["run"].get<int>());
    if (!base["id"].is_null() && !var["id"].is_null()) {
      EXPECT_NE(base["id"], var["id"]) << d.dump();
      ASSERT_TRUE(base.contains("margin")) << d.dump();
      EXPECT_GE(base["margin"].get<double>(), 0.0);
    }
  }
  Ran text = Bench("determinism --model " + model_ +
                   " --runs 8 --max-tokens 6 --max-others 6 --seed 5 --test-perturb 0.5");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("2 distinct completions out of 8 runs"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("diverged from #1 at step"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("margin"), std::string::npos) << text.out;
}

TEST_F(BenchCliTest, ThroughputReportsBothModesForEachBatchSize) {
  Ran r = Bench("throughput --model " + model_ +
                " --batch 1,3 --prompt-len 8 --decode-tokens 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["batch"].get<int>(), 1);
  EXPECT_EQ(j["rows"][1]["batch"].get<int>(), 3);
  for (const auto& row : j["rows"]) {
    for (const char* mode : {"canonical", "fast"}) {
      ASSERT_TRUE(row.contains(mode)) << row.dump();
      EXPECT_GT(row[mode]["prefill_tokens_per_s"].get<double>(), 0) << row.dump();
      EXPECT_GT(row[mode]["decode_tokens_per_s"].get<double>(), 0) << row.dump();
    }
    EXPECT_NEAR(row["decode_ratio"].get<double>(),
                row["canonical"]["decode_tokens_per_s"].get<double>() /
                    row["fast"]["decode_tokens_per_s"].get<double>(),
                1e-9);
  }
  // The CPU path that ran and its measured fp32 FMA peak, with prefill as a fraction of it.
  EXPECT_EQ(j["cpu_isa"].get<std::string>(), kernels::CpuIsaPathName(kernels::Impl::kAuto));
  EXPECT_GT(j["fma_peak_gflops"].get<double>(), 0);
  for (const auto& row : j["rows"]) {
    EXPECT_NEAR(row["canonical_prefill_fraction_of_peak"].get<double>(),
                row["canonical_prefill_gflops"].get<double>() / j["fma_peak_gflops"].get<double>(),
                1e-9);
  }
  Ran text = Bench("throughput --model " + model_ + " --batch 2 --prompt-len 4 --decode-tokens 2");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("canonical"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("fast"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("c/f"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("fp32 FMA peak"), std::string::npos) << text.out;
}

// TRACE_CPU_ISA forces a CPU path (capped by what the CPU has); an unknown value is named on
// stderr and ignored.
TEST_F(BenchCliTest, CpuIsaEnvironmentVariableForcesThePath) {
  const std::string args =
      "bench throughput --model " + model_ + " --batch 1 --prompt-len 2 --decode-tokens 1 --json";
  for (const char* forced : {"scalar", "avx2", "avx512"}) {
    kernels::Impl impl = kernels::Impl::kAuto;
    ASSERT_TRUE(kernels::ParseCpuIsaPath(forced, &impl));
    Ran r = RunTrace(args, scratch_.path(), std::string("TRACE_CPU_ISA=") + forced);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["cpu_isa"].get<std::string>(), kernels::CpuIsaPathName(impl)) << forced;
    EXPECT_NE(j["device"].get<std::string>().find(kernels::CpuIsaPathName(impl)), std::string::npos)
        << j["device"];
  }
  Ran bad = RunTrace(args, scratch_.path(), "TRACE_CPU_ISA=sse9");
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  EXPECT_NE(bad.err.find("TRACE_CPU_ISA=sse9 is not one of"), std::string::npos) << bad.err;
}

TEST_F(BenchCliTest, BadInputIsOneLineAndExitTwo) {
  const std::vector<std::string> bad = {
      "determinism --model " + model_ + " --numerics sloppy",
      "determinism --model " + scratch_.path() + "/no-such-model --runs 1",
      "determinism --model " + model_ + " --device tpu --runs 1",
      "determinism --model " + model_ + " --runs 0",
      "throughput --model " + scratch_.path() + "/no-such-model",
      "throughput --model " + model_ + " --batch 1,x",
      "throughput --model " + model_ + " --batch 0",
      "",
  };
  for (const auto& args : bad) {
    Ran r = Bench(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(Lines(r.err), 1u) << args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("trace: ", 0), 0u) << r.err;
  }
  Ran missing = Bench("determinism --model " + scratch_.path() + "/no-such-model --runs 1");
  EXPECT_NE(missing.err.find("no-such-model"), std::string::npos) << missing.err;
}

TEST_F(BenchCliTest, HelpTeaches) {
  Ran r = Bench("determinism --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("distinct completions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--numerics"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Examples"), std::string::npos) << r.out;
  Ran t = Bench("throughput --help");
  EXPECT_EQ(t.exit_code, 0);
  EXPECT_NE(t.out.find("--batch"), std::string::npos) << t.out;
}

TEST_F(BenchCliTest, WithoutModelWritesTheDemoModelAndSaysSo) {
  const std::string env = "XDG_DATA_HOME=" + scratch_.path() + "/xdg";
  Ran r = RunTrace("bench determinism --runs 2 --max-tokens 3 --max-others 2 --json",
                   scratch_.path(), env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("demo model"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(scratch_.path() + "/xdg/trace/models/demo-tiny/config.json"));
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["distinct_completions"].get<int>(), 1);
  // The second time it is there already: nothing said.
  Ran again = RunTrace("bench determinism --runs 1 --max-tokens 2 --json", scratch_.path(), env);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err, "");
}

}  // namespace
