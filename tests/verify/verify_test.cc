// `trace verify` and `trace worker` end to end, on SQLite and on a real PostgreSQL server
// (docs/verify.md): runs of two models (a dense and a mixture-of-experts tiny preset) written
// with real engine output, verified by several worker processes; every run verified exactly
// once with the verdict that a replay of it gives; workers killed at seeded points and
// claims left by "dead" workers taken again after their lease, nothing lost or written
// twice; a model file changed after the recording reported with its first divergent token.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "replayer/replayer.h"
#include "replayer/verify_worker.h"
#include "store/verify_queue.h"
#include "testkit/replay_test_util.h"
#include "testkit/shell.h"
#include "tests/store/store_backend.h"

extern char** environ;

namespace trace::store {
namespace {

using json = nlohmann::json;
using testing::Backend;
using testing::SharedPgServer;
using ::trace::testing::ReadWholeFile;
using ::trace::testing::ShellQuote;

[[maybe_unused]] ::testing::Environment* const kPg =
    ::testing::AddGlobalTestEnvironment(new testing::PgEnvironment);

const std::string kTrace = std::string(TRACE_BINARY_DIR) + "/bin/trace";

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CliResult Trace(const std::string& dir, const std::string& store,
                const std::vector<std::string>& args) {
  std::string cmd = ShellQuote(kTrace) + " --store " + ShellQuote(store);
  for (const auto& a : args) cmd.append(" ").append(ShellQuote(a));
  cmd += " >" + dir + "/cmd.out 2>" + dir + "/cmd.err";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadWholeFile(dir + "/cmd.out");
  r.err = ReadWholeFile(dir + "/cmd.err");
  return r;
}

json Parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << text.substr(0, 400);
  return j;
}

// A `trace worker` process on `batch`; its pid.
pid_t StartWorker(const std::string& store, const std::string& batch, const std::string& lease) {
  std::vector<std::string> argv = {kTrace,    "--quiet", "--store",   store,
                                   "worker",  "--batch", batch,       "--exit-when-empty",
                                   "--lease", lease,     "--threads", "1"};
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, kTrace.c_str(), nullptr, nullptr, c.data(), environ), 0);
  return pid;
}

// Waits (polling the store, up to a generous deadline) until `pred(progress)` holds.
template <class Pred>
bool WaitFor(VerifyQueue& q, const std::string& batch, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (std::chrono::steady_clock::now() < deadline) {
    auto p = q.Progress(batch);
    if (!p.ok()) return false;
    if (pred(*p)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class VerifyTest : public testing::BackendTest {
 protected:
  static void SetUpTestSuite() {
    models_ = new ::trace::testing::TempDir();
    ASSERT_TRUE(engine::InitModel("tiny", 11, models_->file("dense")).ok());
    ASSERT_TRUE(engine::InitModel("qwen3-moe-tiny", 12, models_->file("moe")).ok());
  }
  static void TearDownTestSuite() {
    delete models_;
    models_ = nullptr;
  }

  // Writes `n` runs into the store at `location`, alternating between `models` (folders
  // under the suite's folder), each a scripted agent with its own inputs and seeds.
  std::vector<std::string> WriteRuns(const std::string& location, int n,
                                     const std::vector<std::string>& models) {
    auto store = Store::Open(location);
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return {};
    std::vector<std::string> ids;
    for (size_t m = 0; m < models.size(); ++m) {
      auto model = engine::Model::Load(models[m]);
      EXPECT_TRUE(model.ok()) << model.status().message();
      engine::EngineOptions eo;
      eo.threads = 1;
      auto eng = engine::Engine::Create(*model, eo);
      auto tok = engine::Tokenizer::Load(models[m] + "/tokenizer.json");
      EXPECT_TRUE(eng.ok() && tok.ok());
      if (!eng.ok() || !tok.ok()) return {};
      for (int i = static_cast<int>(m); i < n; i += static_cast<int>(models.size())) {
        replayer::testing::AgentInputs in;
        in.seed = 1000 + static_cast<uint64_t>(i);
        in.user_name = "user" + std::to_string(i);
        in.max_tokens = 4;
        auto run = replayer::testing::RunScriptedAgent(**eng, **tok, in);
        EXPECT_TRUE(run.ok());
        if (!run.ok()) return {};
        auto id = replayer::testing::WriteRun(**store, *run);
        EXPECT_TRUE(id.ok());
        if (!id.ok()) return {};
        ids.push_back(*id);
        model_of_[*id] = models[m];
      }
    }
    return ids;
  }

  // What the library's replay (the one `trace replay` runs) says of each run: its level.
  std::map<std::string, std::string> ReplayLevels(const std::string& location,
                                                  const std::vector<std::string>& ids) {
    auto store = Store::Open(location);
    EXPECT_TRUE(store.ok());
    std::map<std::string, std::string> out;
    if (!store.ok()) return out;
    replayer::EngineCache cache;
    replayer::ReplayOptions o;
    o.threads = 1;
    o.cache = &cache;
    for (const std::string& id : ids) {
      auto r = replayer::ReplayRun(**store, id, o);
      EXPECT_TRUE(r.ok()) << r.status().message();
      out[id] = r.ok() ? replayer::LevelKey(r->level) : "error";
    }
    return out;
  }

  std::string dense() const { return models_->file("dense"); }
  std::string moe() const { return models_->file("moe"); }

  static inline ::trace::testing::TempDir* models_ = nullptr;  // the suite's models
  std::map<std::string, std::string> model_of_;
};

INSTANTIATE_TEST_SUITE_P(Backends, VerifyTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres),
                         testing::BackendName);

// 200 runs on PostgreSQL (40 on SQLite) verified by 4 local workers (2): each run once,
// with the level a replay of it reaches, the verdicts in `trace ls` and `trace show`.
TEST_P(VerifyTest, EveryRunIsVerifiedOnceWithTheVerdictOfItsReplay) {
  const int n = postgres() ? 200 : 40;
  const std::string workers = postgres() ? "4" : "2";
  const std::string store = Location("every");
  const std::vector<std::string> ids = WriteRuns(store, n, {dense(), moe()});
  ASSERT_EQ(ids.size(), static_cast<size_t>(n));

  CliResult r = Trace(dir_.path(), store, {"verify", "--workers", workers, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 2000);
  json j = Parse(r.out);
  ASSERT_EQ(j["runs"].size(), static_cast<size_t>(n));
  EXPECT_EQ(j["done"], n);
  std::map<std::string, std::string> verdict;
  for (const auto& run : j["runs"]) {
    EXPECT_TRUE(verdict.emplace(run["run_id"], run["verdict"]).second) << run.dump();
    EXPECT_EQ(run["model"], model_of_[run["run_id"].get<std::string>()]);
  }
  EXPECT_EQ(verdict.size(), static_cast<size_t>(n));
  const auto levels = ReplayLevels(store, ids);
  for (const std::string& id : ids) {
    EXPECT_EQ(verdict[id], levels.at(id)) << id;
    EXPECT_EQ(verdict[id], "bitwise") << id;  // same machine, same build, same files
  }
  EXPECT_EQ(j["summary"]["by_model"][dense()]["bitwise"], n / 2);
  EXPECT_EQ(j["summary"]["by_model"][moe()]["bitwise"], n / 2);

  // `trace replay` itself, on a seeded sample, says the same.
  std::mt19937 rng(7);
  for (int k = 0; k < 3; ++k) {
    const std::string& id = ids[rng() % ids.size()];
    CliResult rep = Trace(dir_.path(), store, {"replay", id, "--json"});
    ASSERT_EQ(rep.exit_code, 0) << rep.err;
    EXPECT_EQ(Parse(rep.out)["level"], verdict[id]) << id;
  }

  // Stored: one verdict per run, shown by ls and show.
  auto opened = Store::Open(store);
  ASSERT_TRUE(opened.ok());
  auto q = (*opened)->OpenVerifyQueue();
  ASSERT_TRUE(q.ok());
  for (const std::string& id : ids) {
    auto rows = (*q)->RunVerifications(id);
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(rows->size(), 1u) << id;
  }
  CliResult ls = Trace(dir_.path(), store, {"ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  json listed = Parse(ls.out);
  ASSERT_EQ(listed.size(), static_cast<size_t>(n));
  for (const auto& row : listed) {
    ASSERT_EQ(row["verifications"].size(), 1u) << row.dump();
    EXPECT_EQ(row["verifications"][0]["verdict"], verdict[row["run_id"].get<std::string>()]);
  }
  CliResult show = Trace(dir_.path(), store, {"show", ids[0]});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("verified: bitwise on cpu "), std::string::npos) << show.out;
}

// Workers SIGKILLed at seeded points, and claims left behind by "dead" workers: every job
// is claimed again once its lease ends, and every run gets exactly one verdict.
TEST_P(VerifyTest, KilledWorkersLoseNoRunAndNoRunIsVerifiedTwice) {
  const int n = postgres() ? 80 : 30;
  const std::string store = Location("killed");
  const std::vector<std::string> ids = WriteRuns(store, n, {dense(), moe()});
  ASSERT_EQ(ids.size(), static_cast<size_t>(n));
  CliResult enq = Trace(dir_.path(), store, {"verify", "--enqueue", "--json"});
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  const std::string batch = Parse(enq.out)["batch"];
  ASSERT_EQ(Parse(enq.out)["jobs"], n);

  auto opened = Store::Open(store);
  ASSERT_TRUE(opened.ok());
  auto q = (*opened)->OpenVerifyQueue();
  ASSERT_TRUE(q.ok());
  // Two "dead" workers: each claimed a job with a 1 s lease and will never renew it.
  std::vector<VerifyJob> ghosts;
  for (int g = 0; g < 2; ++g) {
    ClaimOptions c;
    c.worker = "ghost:" + std::to_string(g);
    c.lease_ms = 1000;
    c.batch_id = batch;
    auto job = (*q)->Claim(c);
    ASSERT_TRUE(job.ok() && job->has_value()) << job.status().message();
    ghosts.push_back(**job);
  }

  // Four workers; two of them killed once the batch has reached seeded done-counts, each
  // replaced by a new one.
  std::vector<pid_t> live;
  for (int w = 0; w < 4; ++w) live.push_back(StartWorker(store, batch, "2"));
  std::mt19937 rng(20261207);
  std::vector<int> kill_at = {static_cast<int>(2 + rng() % (n / 3)),
                              static_cast<int>(n / 3 + rng() % (n / 3))};
  for (size_t k = 0; k < kill_at.size(); ++k) {
    ASSERT_TRUE(WaitFor(**q, batch, [&](const BatchProgress& p) {
      return p.done >= kill_at[k] || p.done == p.total;
    }));
    const pid_t victim = live[k];
    ::kill(victim, SIGKILL);
    waitpid(victim, nullptr, 0);
    live[k] = StartWorker(store, batch, "2");
  }
  for (pid_t pid : live) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }

  auto progress = (*q)->Progress(batch);
  ASSERT_TRUE(progress.ok());
  EXPECT_EQ(progress->done, n);
  EXPECT_EQ(progress->total, n);
  EXPECT_GE(progress->reclaimed, 2);  // at least the ghosts' jobs
  auto results = (*q)->BatchResults(batch);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), static_cast<size_t>(n));
  std::set<std::string> seen;
  for (const Verification& v : *results) {
    EXPECT_TRUE(seen.insert(v.run_id).second) << "verified twice: " << v.run_id;
    EXPECT_EQ(v.verdict, "bitwise") << v.run_id << ": " << v.first_divergence;
    EXPECT_NE(v.worker.rfind("ghost:", 0), 0u) << v.run_id;
  }
  EXPECT_EQ(seen, std::set<std::string>(ids.begin(), ids.end()));
  for (const std::string& id : ids) {
    auto rows = (*q)->RunVerifications(id);
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(rows->size(), 1u) << id;
  }
  // A ghost that wakes up too late cannot write its verdict: the job was taken again.
  Verification late;
  late.run_id = ghosts[0].run_id;
  late.verdict = "diverged";
  auto finished = (*q)->Finish(ghosts[0], late);
  ASSERT_TRUE(finished.ok());
  EXPECT_FALSE(*finished);
  auto rows = (*q)->RunVerifications(ghosts[0].run_id);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].verdict, "bitwise");

  CliResult report = Trace(dir_.path(), store, {"verify", "--batch", batch, "--json"});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(Parse(report.out)["runs"].size(), static_cast<size_t>(n));
}

// SIGTERM: the worker finishes the job in hand, writes its verdict and exits 0, leaving no
// claim behind (a long lease would otherwise hold its job for a minute).
TEST_P(VerifyTest, SigtermFinishesTheJobInHandAndLeavesNoClaim) {
  if (postgres()) GTEST_SKIP() << "the signal handling does not depend on the backend";
  const int n = 30;
  const std::string store = Location("sigterm");
  ASSERT_EQ(WriteRuns(store, n, {dense(), moe()}).size(), static_cast<size_t>(n));
  CliResult enq = Trace(dir_.path(), store, {"verify", "--enqueue", "--json"});
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  const std::string batch = Parse(enq.out)["batch"];
  auto opened = Store::Open(store);
  ASSERT_TRUE(opened.ok());
  auto q = (*opened)->OpenVerifyQueue();
  ASSERT_TRUE(q.ok());
  std::vector<std::string> argv = {kTrace,    "--quiet", "--store",   store, "worker",
                                   "--lease", "60",      "--threads", "1"};
  std::vector<char*> c;
  for (auto& a : argv) c.push_back(a.data());
  c.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, kTrace.c_str(), nullptr, nullptr, c.data(), environ), 0);
  ASSERT_TRUE(WaitFor(**q, batch, [](const BatchProgress& p) { return p.done >= 3; }));
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto p = (*q)->Progress(batch);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->claimed, 0);
  EXPECT_GE(p->done, 3);
  EXPECT_EQ(p->done + p->queued, n);
  auto results = (*q)->BatchResults(batch);
  ASSERT_TRUE(results.ok());
  EXPECT_EQ(static_cast<int64_t>(results->size()), p->done);
}

// A model file changed in place after the recording: verify reports every run diverged, at
// the first divergent token `trace replay --model` finds, and exits 1.
TEST_P(VerifyTest, AChangedModelFileIsReportedWithItsFirstDivergentToken) {
  if (postgres()) GTEST_SKIP() << "the model file is the same on both backends (SQLite runs it)";
  const std::string store = Location("changed");
  const std::string model = dir_.file("edited");
  ASSERT_TRUE(engine::InitModel("tiny", 11, model).ok());
  const std::vector<std::string> ids = WriteRuns(store, 3, {model});
  ASSERT_EQ(ids.size(), 3u);
  const std::string edited = dir_.file("edited-copy");
  ASSERT_TRUE(replayer::testing::CopyModelWithChangedWeight(
                  model, edited, "model.layers.1.mlp.down_proj.weight", 5, 40.0f)
                  .ok());
  std::filesystem::copy_file(edited + "/model.safetensors", model + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);

  CliResult r = Trace(dir_.path(), store, {"verify", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  json j = Parse(r.out);
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["summary"]["by_verdict"]["diverged"], 3);
  EXPECT_EQ(j["summary"]["by_fingerprint_difference"]["model.weights_sha256 (model.safetensors)"],
            3);
  for (const auto& run : j["runs"]) {
    const std::string id = run["run_id"];
    CliResult rep = Trace(dir_.path(), store, {"replay", id, "--model", model, "--json"});
    ASSERT_EQ(rep.exit_code, 1) << rep.err;
    const json d = Parse(rep.out)["first_divergence"];
    ASSERT_TRUE(d.is_object()) << rep.out.substr(0, 400);
    const std::string line = run["first_divergence"];
    EXPECT_EQ(run["verdict"], "diverged");
    EXPECT_EQ(line.rfind("call " + std::to_string(d["call"].get<int>()) + ", token " +
                             std::to_string(d["step"].get<int>() + 1) + ": recorded ",
                         0),
              0u)
        << line;
    EXPECT_NE(
        line.find("(" + std::to_string(d["recorded_token"]["id"].get<int>()) + "), replayed "),
        std::string::npos)
        << line;
    EXPECT_EQ(
        line.substr(line.size() - 2 - std::to_string(d["replayed_token"]["id"].get<int>()).size()),
        "(" + std::to_string(d["replayed_token"]["id"].get<int>()) + ")")
        << line;
  }
  CliResult ls = Trace(dir_.path(), store, {"ls"});
  EXPECT_NE(ls.out.find("VERIFIED"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("diverged"), std::string::npos) << ls.out;
}

// Bad input: one line naming what and where.
TEST_P(VerifyTest, BadSelectionsAreOneLineErrors) {
  if (postgres()) GTEST_SKIP() << "flag checks do not depend on the backend";
  const std::string store = Location("bad");
  WriteRuns(store, 2, {dense()});
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"verify", "--since", "yesterday"}, "--since 'yesterday' is not a date"},
      {{"verify", "--workers", "0"}, "--workers must be 1..256"},
      {{"verify", "--require", "close"}, "--require 'close' is not one of bitwise, tokens"},
      {{"verify", "--label", "nope"}, "no run to verify in"},
      {{"verify", "ZZZZ"}, "no run matches 'ZZZZ'"},
      {{"verify", "--batch", "01NOSUCHBATCH"}, "no verify batch '01NOSUCHBATCH'"},
      {{"verify", "--batch", "X", "--enqueue"}, "--batch reports on a batch made earlier"},
      {{"worker", "--lease", "0"}, "--lease must be 1..86400 seconds"},
  };
  for (const Case& c : cases) {
    CliResult r = Trace(dir_.path(), store, c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[1] << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace trace::store
