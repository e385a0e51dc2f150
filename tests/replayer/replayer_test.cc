// End-to-end tests of replay and diff: runs recorded through the store's writer API with
// LlmCall events produced by the real engine and sampler, replayed by the library and by the
// `trace` binary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>

#include "base/process_identity.h"
#include "replayer/diff.h"
#include "replayer/replayer.h"
#include "replayer/report.h"
#include "testkit/replay_test_util.h"
#include "tests/replayer/replay_test_fixture.h"

namespace trace::replayer {
namespace {

using testing::AgentInputs;
using testing::AgentRun;
using testing::TempDir;

// The layer whose weight the "changed model" edits, and the edit.
constexpr int kChangedLayer = 1;
const char* kChangedTensor = "model.layers.1.mlp.down_proj.weight";

class ReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    model_dir_ = dir_->file("model");
    changed_dir_ = dir_->file("model-changed");
    ASSERT_TRUE(engine::InitModel("tiny", 11, model_dir_).ok());
    Status st = testing::CopyModelWithChangedWeight(model_dir_, changed_dir_, kChangedTensor,
                                                    /*index=*/5, /*delta=*/40.0f);
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto tok = engine::Tokenizer::Load(model_dir_ + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete dir_;
  }

  static std::unique_ptr<engine::Engine> MakeEngine(const std::string& dir) {
    return testing::MakeEngine(dir);
  }

  std::unique_ptr<store::Store> OpenStore(const std::string& name = "traces.db") {
    auto store = store::Store::Open(dir_->file(name));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return std::move(*store);
  }

  AgentRun Record(const std::string& model_dir, const AgentInputs& in) {
    auto engine = MakeEngine(model_dir);
    auto run = testing::RunScriptedAgent(*engine, *tokenizer_, in);
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    return std::move(*run);
  }

  // Runs the trace binary; returns the exit status, stdout in *out, stderr in *err.
  static int RunTrace(const std::string& args, std::string* out, std::string* err) {
    return testing::RunTraceBinary(args, dir_->path(), out, err);
  }

  static TempDir* dir_;
  static std::string model_dir_;
  static std::string changed_dir_;
  static engine::Tokenizer* tokenizer_;
};

TempDir* ReplayTest::dir_ = nullptr;
std::string ReplayTest::model_dir_;
std::string ReplayTest::changed_dir_;
engine::Tokenizer* ReplayTest::tokenizer_ = nullptr;

TEST_F(ReplayTest, RecordedRunReplaysBitwise) {
  auto store = OpenStore();
  AgentRun run = Record(model_dir_, AgentInputs{});
  auto id = testing::WriteRun(*store, run);
  ASSERT_TRUE(id.ok()) << id.status().ToString();

  auto report = ReplayRun(*store, *id, ReplayOptions{});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->level, Level::kBitwise) << RenderReplayText(*report);
  EXPECT_EQ(report->run_status, "complete");
  EXPECT_FALSE(report->model_override);
  ASSERT_EQ(report->calls.size(), 2u);
  int64_t recorded_tokens = 0;
  for (const auto& e : run.events) {
    if (e.has_llm_call()) recorded_tokens += e.llm_call().token_ids_size();
  }
  EXPECT_EQ(report->tokens_verified, recorded_tokens);
  for (const auto& c : report->calls) {
    EXPECT_EQ(c.level, Level::kBitwise);
    EXPECT_EQ(c.digests_differ, 0);
    EXPECT_FALSE(c.divergence.has_value());
  }
  EXPECT_TRUE(report->fingerprint_differences.empty()) << report->fingerprint_differences[0].field;

  // The same through the CLI: exit 0, JSON says bitwise.
  std::string out, err;
  int rc =
      RunTrace("--store " + dir_->file("traces.db") + " replay " + *id + " --json", &out, &err);
  EXPECT_EQ(rc, 0) << err << out;
  auto json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  EXPECT_EQ(json["level"], "bitwise");
  EXPECT_EQ(json["calls"].size(), 2u);

  // Only call 2, alongside three random companion sequences: still bitwise (canonical).
  ReplayOptions batched;
  batched.batch = 4;
  batched.calls = {2};
  auto batched_report = ReplayRun(*store, *id, batched);
  ASSERT_TRUE(batched_report.ok()) << batched_report.status().ToString();
  ASSERT_EQ(batched_report->calls.size(), 1u);
  EXPECT_EQ(batched_report->calls[0].call, 2);
  EXPECT_EQ(batched_report->level, Level::kBitwise);
}

// A call drawn with frequency_penalty, presence_penalty and logit_bias re-draws to the
// recorded tokens when the replayer samples every step (numerics unknown, so the sampler
// is not skipped), and diverges when the replay leaves them out.
TEST_F(ReplayTest, PenaltiesAndLogitBiasRedrawTheRecordedTokens) {
  auto engine = MakeEngine(model_dir_);
  ASSERT_NE(engine, nullptr);
  engine::SamplingParams params;
  params.temperature = 0.0f;
  params.max_tokens = 16;
  // Negative: greedy decoding of the tiny model does not repeat itself; these make it.
  params.frequency_penalty = -1.5f;
  params.presence_penalty = -0.5f;
  params.logit_bias = {{220, 2.0f}, {1000, -100.0f}};
  auto recorded = testing::GenerateCall(*engine, tokenizer_->Encode("Once upon a time"), params,
                                        /*seed=*/9, false);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  ASSERT_GT(recorded->token_ids_size(), 1);
  auto call = ToRecordedCall(*recorded, 1, 1);
  ASSERT_TRUE(call.ok()) << call.status().ToString();
  EXPECT_EQ(call->params.frequency_penalty, -1.5f);
  EXPECT_EQ(call->params.presence_penalty, -0.5f);
  EXPECT_EQ(call->params.logit_bias, params.logit_bias);
  call->numerics.clear();  // unknown contract: every step goes through the sampler
  VerifyOptions options;
  options.eos_token_ids = engine->model().config().eos_token_ids;
  auto report = VerifyCall(*engine, tokenizer_, *call, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->divergence.has_value());
  EXPECT_EQ(report->tokens_verified, recorded->token_ids_size());

  // The same recording replayed without the penalties and bias: a divergence.
  RecordedCall bare = *call;
  bare.params.frequency_penalty = bare.params.presence_penalty = 0.0f;
  bare.params.logit_bias.clear();
  auto bare_report = VerifyCall(*engine, tokenizer_, bare, options);
  ASSERT_TRUE(bare_report.ok()) << bare_report.status().ToString();
  EXPECT_TRUE(bare_report->divergence.has_value());

  // A newer-format run is refused rather than replayed without what it may need.
  auto store = OpenStore("penalty_format.db");
  AgentRun run = Record(model_dir_, AgentInputs{});
  run.header.set_format_version(proto::CURRENT_FORMAT_VERSION + 1);
  auto id = testing::WriteRun(*store, run);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto newer = ReplayRun(*store, *id, ReplayOptions{});
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("newer than this build"), std::string::npos)
      << newer.status().message();
}

// `trace diff` names a differing penalty or bias as a parameter difference of the call.
TEST_F(ReplayTest, DiffNamesDifferingPenaltiesAndLogitBias) {
  AgentRun a = Record(model_dir_, AgentInputs{});
  AgentRun b = a;
  for (auto& e : b.events) {
    if (!e.has_llm_call()) continue;
    auto* p = e.mutable_llm_call()->mutable_params();
    p->set_frequency_penalty(0.5f);
    p->set_presence_penalty(-1.0f);
    proto::LogitBias* bias = p->add_logit_bias();
    bias->set_id(42);
    bias->set_bias(-100.0f);
    break;
  }
  auto store = OpenStore("penalty_diff.db");
  auto id_a = testing::WriteRun(*store, a);
  auto id_b = testing::WriteRun(*store, b);
  ASSERT_TRUE(id_a.ok() && id_b.ok());
  DiffOptions options;
  options.call = 1;
  auto diff = DiffRuns(*store, *id_a, *id_b, options);
  ASSERT_TRUE(diff.ok()) << diff.status().ToString();
  ASSERT_EQ(diff->calls.size(), 1u) << RenderDiffText(*diff);
  std::map<std::string, std::pair<std::string, std::string>> params;
  for (const auto& f : diff->calls[0].params) params[f.field] = {f.recorded, f.current};
  ASSERT_EQ(params.size(), 3u) << RenderDiffText(*diff);
  EXPECT_EQ(params["frequency_penalty"].second, "0.5");
  EXPECT_EQ(params["presence_penalty"].second, "-1");
  EXPECT_EQ(params["logit_bias"].first, "(none)");
  EXPECT_EQ(params["logit_bias"].second, "{42: -100}");
}

// Where does generation with the changed model first differ from the recording? Computed
// independently: generate each recorded call's prompt afresh with the changed model.
struct Place {
  int call = 0;
  int step = -1;
};
Place FirstDifference(engine::Engine& changed, const AgentRun& run) {
  int number = 0;
  for (const auto& e : run.events) {
    if (!e.has_llm_call()) continue;
    ++number;
    const auto& rec = e.llm_call();
    engine::SamplingParams params;
    params.temperature = rec.params().temperature();
    params.top_p = rec.params().top_p();
    params.top_k = rec.params().top_k();
    params.max_tokens = rec.params().max_tokens();
    std::vector<int32_t> prompt(rec.prompt_token_ids().begin(), rec.prompt_token_ids().end());
    auto fresh = testing::GenerateCall(changed, prompt, params, rec.seed_used(), false);
    EXPECT_TRUE(fresh.ok());
    int n = std::min(fresh->token_ids_size(), rec.token_ids_size());
    for (int i = 0; i < n; ++i) {
      if (fresh->token_ids(i) != rec.token_ids(i)) return {number, i};
    }
  }
  return {};
}

TEST_F(ReplayTest, ChangedWeightDivergesWhereGenerationDiffersAndNamesTheLayer) {
  auto store = OpenStore();
  AgentInputs in;
  in.layer_digests = true;
  in.max_tokens = 24;
  AgentRun run = Record(model_dir_, in);
  auto id = testing::WriteRun(*store, run);
  ASSERT_TRUE(id.ok()) << id.status().ToString();

  auto changed = MakeEngine(changed_dir_);
  Place expected = FirstDifference(*changed, run);
  ASSERT_GT(expected.call, 0) << "the weight edit changed no sampled token; pick a larger one";

  ReplayOptions options;
  options.model_dir = changed_dir_;
  auto report = ReplayRun(*store, *id, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->model_override);
  ASSERT_FALSE(report->model_differences.empty());
  EXPECT_NE(report->model_differences[0].field.find("model.safetensors"), std::string::npos);
  EXPECT_EQ(report->level, Level::kDiverged);
  const Divergence* d = report->first_divergence();
  ASSERT_NE(d, nullptr) << RenderReplayText(*report);
  EXPECT_EQ(d->call, expected.call);
  EXPECT_EQ(d->step, expected.step);
  EXPECT_NE(d->recorded_token, d->replayed_token);
  EXPECT_TRUE(d->layer_digests_recorded);
  EXPECT_EQ(d->first_differing_layer, kChangedLayer) << RenderReplayText(*report);
  EXPECT_EQ(d->replayed_top.size(), 5u);
  for (size_t i = 1; i < d->replayed_top.size(); ++i) {
    EXPECT_GE(d->replayed_top[i - 1].logit, d->replayed_top[i].logit);
  }
  EXPECT_LE(d->replayed_logit, d->replayed_top[0].logit);
  EXPECT_FALSE(d->replay_continuation.empty());
  EXPECT_EQ(d->replay_continuation[0], d->replayed_token);
  EXPECT_EQ(d->text_before.empty(), d->step == 0);

  // The text report names the place; the CLI exits 1 (diverged) and writes an HTML page.
  std::string text = RenderReplayText(*report);
  if (std::getenv("TRACE_TEST_VERBOSE")) std::cout << text;
  EXPECT_NE(text.find("first divergence: call " + std::to_string(expected.call)), std::string::npos)
      << text;
  std::string out, err;
  std::string html = dir_->file("replay.html");
  int rc = RunTrace("--store " + dir_->file("traces.db") + " replay " + *id + " --model " +
                        changed_dir_ + " --html " + html,
                    &out, &err);
  EXPECT_EQ(rc, 1) << err << out;
  EXPECT_NE(out.find("layer " + std::to_string(kChangedLayer)), std::string::npos) << out;
  // The page is trace ui's view of the run (ui/snapshot.h): the report is data in it, and
  // the divergence is drawn by its script (the chromium check below).
  std::string page = testing::ReadAll(html);
  EXPECT_NE(page.find("\"level\":\"diverged\""), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);  // self-contained
  EXPECT_EQ(page.find("https://"), std::string::npos);
  if (std::filesystem::exists("/usr/bin/chromium")) {
    std::string profile = dir_->file("chromium-profile");
    std::string dom_file = dir_->file("dom.html");
    std::string cmd =
        "timeout 60 /usr/bin/chromium --headless --no-sandbox --disable-gpu --no-first-run "
        "--disable-background-networking --disable-component-update --disable-sync "
        "--user-data-dir=" +
        profile + " --dump-dom file://" + html + " >" + dom_file + " 2>/dev/null";
    int status = std::system(cmd.c_str());
    ASSERT_EQ(WEXITSTATUS(status), 0) << cmd;
    std::string dom = testing::ReadAll(dom_file);
    EXPECT_NE(dom.find("id=\"divergence\""), std::string::npos) << dom.substr(0, 500);
    EXPECT_NE(dom.find("data-level=\"diverged\""), std::string::npos);
  } else {
    GTEST_LOG_(INFO) << "no /usr/bin/chromium: HTML render check skipped";
  }

  // Without --model, a run that names the changed folder but hashes of the original is an
  // error naming the differing file.
  AgentRun mislabelled = run;
  mislabelled.header.mutable_model()->set_model_dir(changed_dir_);
  auto bad_id = testing::WriteRun(*store, mislabelled);
  ASSERT_TRUE(bad_id.ok());
  auto refused = ReplayRun(*store, *bad_id, ReplayOptions{});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("model.safetensors"), std::string::npos)
      << refused.status().message();
  rc = RunTrace("--store " + dir_->file("traces.db") + " replay " + *bad_id, &out, &err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("model.safetensors"), std::string::npos) << err;
}

// The verifier accepts a token without re-running the sampler only where the replayed
// logits digest equals the recorded one; wherever it differs the sampler must draw again.
TEST_F(ReplayTest, DifferingDigestIsRedrawnNotAccepted) {
  auto store = OpenStore();
  AgentRun run = Record(model_dir_, AgentInputs{});
  std::vector<proto::LlmCall*> calls;
  for (auto& e : run.events) {
    if (e.has_llm_call()) calls.push_back(e.mutable_llm_call());
  }
  ASSERT_EQ(calls.size(), 2u);
  // Call 1: every digest altered, tokens kept: the same tokens, but not bitwise.
  const int n1 = calls[0]->token_ids_size();
  ASSERT_GT(n1, 0);
  for (int i = 0; i < n1; ++i) calls[0]->set_logits_digests(i, calls[0]->logits_digests(i) ^ 1);
  // Call 2: the last token replaced (it feeds nothing, so its logits replay exactly) and its
  // digest altered: only the sampler can tell that this token would not be drawn.
  const int n2 = calls[1]->token_ids_size();
  ASSERT_GT(n2, 0);
  const int32_t drawn = calls[1]->token_ids(n2 - 1);
  const int32_t other = drawn == 0 ? 1 : 0;
  calls[1]->set_token_ids(n2 - 1, other);
  calls[1]->set_logits_digests(n2 - 1, calls[1]->logits_digests(n2 - 1) ^ 1);
  auto id = testing::WriteRun(*store, run);
  ASSERT_TRUE(id.ok()) << id.status().ToString();

  auto report = ReplayRun(*store, *id, ReplayOptions{});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->calls.size(), 2u);
  const CallReport& c1 = report->calls[0];
  EXPECT_EQ(c1.level, Level::kTokens) << RenderReplayText(*report);
  EXPECT_EQ(c1.digests_differ, n1);
  EXPECT_FALSE(c1.divergence.has_value());
  const CallReport& c2 = report->calls[1];
  EXPECT_EQ(c2.level, Level::kDiverged) << RenderReplayText(*report);
  ASSERT_TRUE(c2.divergence.has_value());
  EXPECT_EQ(c2.divergence->step, n2 - 1);
  EXPECT_EQ(c2.divergence->recorded_token, other);
  EXPECT_EQ(c2.divergence->replayed_token, drawn);
  EXPECT_EQ(report->level, Level::kDiverged);
}

TEST_F(ReplayTest, IncompleteRunReplaysWhatExistsAndSaysSo) {
  auto store = OpenStore();
  AgentRun run = Record(model_dir_, AgentInputs{});
  // Cut off after the first model call, without a RunEnd: what a killed recorder leaves.
  AgentRun cut = run;
  cut.events.resize(4);
  ASSERT_TRUE(cut.events.back().has_llm_call());
  // Its recorder is gone: this process, but with another start time (a reused pid).
  ProcessIdentity self = CurrentProcess();
  proto::RecorderProcess* dead = cut.header.mutable_recorder();
  dead->set_pid(self.pid);
  dead->set_host(self.host);
  dead->set_boot_id(self.boot_id);
  dead->set_start_ticks(self.start_ticks + 1);
  auto id = testing::WriteRun(*store, cut, /*end=*/false);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto report = ReplayRun(*store, *id, ReplayOptions{});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->run_status, "crashed");
  EXPECT_EQ(report->calls.size(), 1u);
  EXPECT_EQ(report->level, Level::kBitwise);
  EXPECT_NE(RenderReplayText(*report).find("note: the run is crashed"), std::string::npos);
}

TEST_F(ReplayTest, UnknownAmbiguousAndMissingRunsAreClearErrors) {
  auto store = OpenStore("errors.db");
  AgentRun run = Record(model_dir_, AgentInputs{});
  auto a = testing::WriteRun(*store, run);
  auto b = testing::WriteRun(*store, run);
  ASSERT_TRUE(a.ok() && b.ok());

  auto unknown = ReplayRun(*store, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", ReplayOptions{});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), std::string::npos);

  // Two runs made a moment apart share their leading (timestamp) characters.
  std::string prefix = a->substr(0, 4);
  ASSERT_EQ(b->substr(0, 4), prefix);
  auto ambiguous = ReplayRun(*store, prefix, ReplayOptions{});
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_EQ(ambiguous.status().code(), StatusCode::kInvalidArgument);
  auto ambiguous_diff = DiffRuns(*store, prefix, *a, DiffOptions{});
  EXPECT_FALSE(ambiguous_diff.ok());

  auto empty = OpenStore("empty.db");
  auto missing = ReplayRun(*empty, *a, ReplayOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(*a), std::string::npos);

  // The CLI: exit 2 and one line naming the id.
  std::string out, err;
  int rc = RunTrace("--store " + dir_->file("empty.db") + " replay " + *a, &out, &err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find(*a), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  rc = RunTrace("--store " + dir_->file("errors.db") + " diff " + prefix + " " + *a, &out, &err);
  EXPECT_EQ(rc, 2) << out;
  rc = RunTrace("--store " + dir_->file("errors.db") + " replay " + *a + " --calls 9", &out, &err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("call 9"), std::string::npos) << err;
}

// The real thing: `trace record` runs the example agent (constrained tool calls, tool
// results, context, template variables, clock reads) and `trace replay` reproduces every
// model call bit for bit, also batched with companions.
TEST_F(ReplayTest, RecordedExampleAgentReplaysBitwiseThroughTheCli) {
  const std::string db = dir_->file("recorded.db");
  store::RunSummary run;
  ASSERT_NO_FATAL_FAILURE(testing::RecordExampleAgent(db, model_dir_, 3, 12, dir_->path(), &run));
  const std::string id = run.run_id;
  std::string out, err;
  int rc = RunTrace("--store " + db + " replay " + id + " --json", &out, &err);
  EXPECT_EQ(rc, 0) << err << out;
  auto json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  EXPECT_EQ(json["level"], "bitwise") << out;
  EXPECT_EQ(json["calls"].size(), static_cast<size_t>(run.model_calls)) << out;
  EXPECT_EQ(json["tokens_verified"], run.sampled_tokens);
  EXPECT_EQ(json["run_status"], "complete");

  rc = RunTrace("--store " + db + " replay " + id.substr(0, 12) + " --batch 3", &out, &err);
  EXPECT_EQ(rc, 0) << err << out;
  EXPECT_NE(out.find("result: bitwise"), std::string::npos) << out;
}

// ---- run diff: pairs differing in exactly one source --------------------------------

struct DiffCase {
  const char* name;
  Source source;
  const char* first_kind;  // the kind of the first differing event
  void (*vary)(AgentInputs*);
  bool changed_model;
};

// Names the case in test listings instead of dumping its bytes.
void PrintTo(const DiffCase& c, std::ostream* os) {
  *os << c.name;
}

class DiffTest : public ReplayTest, public ::testing::WithParamInterface<DiffCase> {};

TEST_P(DiffTest, PairDiffersInExactlyThatSource) {
  const DiffCase& c = GetParam();
  AgentInputs base;
  AgentInputs varied;
  if (c.vary) c.vary(&varied);
  AgentRun a = Record(model_dir_, base);
  AgentRun b = Record(c.changed_model ? changed_dir_ : model_dir_, varied);
  auto store = OpenStore("diff.db");
  auto id_a = testing::WriteRun(*store, a);
  auto id_b = testing::WriteRun(*store, b);
  ASSERT_TRUE(id_a.ok() && id_b.ok());

  DiffOptions options;
  options.call = 1;
  auto diff = DiffRuns(*store, *id_a, *id_b, options);
  ASSERT_TRUE(diff.ok()) << diff.status().ToString();
  std::string text = RenderDiffText(*diff);
  if (std::getenv("TRACE_TEST_VERBOSE")) std::cout << text;
  std::set<Source> changed;
  for (const auto& v : diff->sources) {
    if (v.changed) changed.insert(v.source);
  }
  EXPECT_EQ(changed, std::set<Source>{c.source}) << text;
  ASSERT_TRUE(diff->first_difference.has_value()) << text;
  EXPECT_EQ(diff->first_difference->kind, c.first_kind) << text;
  // The expected first differing event, found by comparing the streams directly.
  uint64_t expected_seq = 0;
  for (size_t i = 0; i < a.events.size(); ++i) {
    const auto& x = a.events[i];
    const auto& y = b.events[i];
    std::string sx, sy;
    proto::Event cx = x, cy = y;
    if (cx.has_llm_call()) {
      cx.mutable_llm_call()->clear_rendered_prompt();
      cy.mutable_llm_call()->clear_rendered_prompt();
      cx.mutable_llm_call()->clear_logprobs();
      cy.mutable_llm_call()->clear_logprobs();
    }
    cx.SerializeToString(&sx);
    cy.SerializeToString(&sy);
    if (sx != sy) {
      expected_seq = i + 1;  // the writer numbers events 1, 2, 3, ... in append order
      break;
    }
  }
  EXPECT_EQ(diff->first_difference->seq_a, expected_seq) << text;
  EXPECT_FALSE(diff->identical());
  EXPECT_EQ(diff->side_by_side_call, 1);
  EXPECT_FALSE(diff->side_by_side.empty());
  auto json = DiffJson(*diff);
  EXPECT_EQ(json["changed"], nlohmann::json::array({SourceName(c.source)}));
  EXPECT_EQ(json["unchanged"].size(), 7u);
}

INSTANTIATE_TEST_SUITE_P(
    Sources, DiffTest,
    ::testing::Values(
        DiffCase{"tool_result", Source::kTools, "tool_result",
                 [](AgentInputs* in) { in->tool_result = "{\"balance\": -5}"; }, false},
        DiffCase{"context_chunk", Source::kContext, "context_chunk",
                 [](AgentInputs* in) { in->chunk = "Invoices are deleted after a year."; }, false},
        DiffCase{"template_var", Source::kPrompt, "template_var",
                 [](AgentInputs* in) { in->user_name = "Grace"; }, false},
        DiffCase{"clock_read", Source::kTime, "clock_read",
                 [](AgentInputs* in) { in->clock_text = "2026-11-30T23:59:59Z"; }, false},
        DiffCase{"seed", Source::kSampling, "llm_call", [](AgentInputs* in) { in->seed = 8; },
                 false},
        DiffCase{"temperature", Source::kSampling, "llm_call",
                 [](AgentInputs* in) { in->temperature = 0.3f; }, false},
        DiffCase{"model", Source::kModel, "llm_call", nullptr, true}),
    [](const ::testing::TestParamInfo<DiffCase>& info) { return info.param.name; });

// Greedy sampling (temperature 0) draws nothing, so the seed cannot change a token: two
// runs that differ only in their seeds at temperature 0 on both sides are no different, and
// `trace diff` says so (no "CHANGED sampling: seed (used)"). The reference that the seed
// did not matter is the engine's own output: both runs sampled the same tokens.
TEST_F(ReplayTest, AtTemperatureZeroADifferentSeedIsNoDifference) {
  AgentInputs greedy_a;
  greedy_a.temperature = 0.0f;
  AgentInputs greedy_b = greedy_a;
  greedy_b.seed = greedy_a.seed + 100;
  AgentRun a = Record(model_dir_, greedy_a);
  AgentRun b = Record(model_dir_, greedy_b);
  int calls = 0;
  for (size_t i = 0; i < a.events.size(); ++i) {
    if (!a.events[i].has_llm_call()) continue;
    ++calls;
    const proto::LlmCall& ca = a.events[i].llm_call();
    const proto::LlmCall& cb = b.events[i].llm_call();
    ASSERT_NE(ca.seed_used(), cb.seed_used());
    ASSERT_NE(ca.params().seed(), cb.params().seed());
    ASSERT_TRUE(std::equal(ca.token_ids().begin(), ca.token_ids().end(), cb.token_ids().begin(),
                           cb.token_ids().end()))
        << "greedy sampling gave different tokens for different seeds";
  }
  ASSERT_EQ(calls, 2);
  auto store = OpenStore("greedy.db");
  auto id_a = testing::WriteRun(*store, a);
  auto id_b = testing::WriteRun(*store, b);
  ASSERT_TRUE(id_a.ok() && id_b.ok());
  auto diff = DiffRuns(*store, *id_a, *id_b, DiffOptions{});
  ASSERT_TRUE(diff.ok()) << diff.status().ToString();
  const std::string text = RenderDiffText(*diff);
  EXPECT_TRUE(diff->identical()) << text;
  EXPECT_TRUE(diff->calls.empty()) << text;
  for (const auto& v : diff->sources)
    EXPECT_FALSE(v.changed) << SourceName(v.source) << ": " << text;
  EXPECT_EQ(text.find("CHANGED"), std::string::npos) << text;
  EXPECT_EQ(text.find("seed"), std::string::npos) << text;
  EXPECT_EQ(DiffJson(*diff)["changed"], nlohmann::json::array()) << text;
  std::string out, err;
  EXPECT_EQ(
      RunTrace("--store " + dir_->file("greedy.db") + " diff " + *id_a + " " + *id_b, &out, &err),
      0)
      << err << out;

  // Greedy on one side only: the seed may matter there, so it is a difference, with the
  // temperature.
  AgentInputs sampled_b = greedy_b;
  sampled_b.temperature = 0.8f;
  AgentRun c = Record(model_dir_, sampled_b);
  auto id_c = testing::WriteRun(*store, c);
  ASSERT_TRUE(id_c.ok());
  auto mixed = DiffRuns(*store, *id_a, *id_c, DiffOptions{});
  ASSERT_TRUE(mixed.ok());
  ASSERT_FALSE(mixed->calls.empty());
  std::set<std::string> fields;
  for (const auto& f : mixed->calls[0].params) fields.insert(f.field);
  EXPECT_TRUE(fields.count("temperature")) << RenderDiffText(*mixed);
  EXPECT_TRUE(fields.count("seed (used)")) << RenderDiffText(*mixed);
  EXPECT_TRUE(mixed->sources[static_cast<int>(Source::kSampling)].changed);
}

TEST_F(ReplayTest, IdenticalRunsDiffToNothingAndCliExitsZero) {
  AgentRun a = Record(model_dir_, AgentInputs{});
  AgentRun b = Record(model_dir_, AgentInputs{});
  auto store = OpenStore("same.db");
  auto id_a = testing::WriteRun(*store, a);
  auto id_b = testing::WriteRun(*store, b);
  ASSERT_TRUE(id_a.ok() && id_b.ok());
  auto diff = DiffRuns(*store, *id_a, *id_b, DiffOptions{});
  ASSERT_TRUE(diff.ok());
  EXPECT_TRUE(diff->identical()) << RenderDiffText(*diff);
  std::string out, err;
  EXPECT_EQ(
      RunTrace("--store " + dir_->file("same.db") + " diff " + *id_a + " " + *id_b, &out, &err), 0)
      << err << out;
  EXPECT_EQ(
      RunTrace("--store " + dir_->file("same.db") + " diff " + *id_a + " " + *id_b + " --call 3",
               &out, &err),
      2);
}

TEST(LineDiffTest, ShowsChangedLinesWithContext) {
  std::string d = LineDiff("a\nb\nc\nd\n", "a\nb\nX\nd\n");
  EXPECT_EQ(d, "  b\n- c\n+ X\n  d\n");
  EXPECT_EQ(LineDiff("same\n", "same\n"), "  same\n");
}

TEST(CallListTest, ParsesListsAndRangesAndRejectsJunk) {
  auto calls = ParseCallList("3,1,5-7,3");
  ASSERT_TRUE(calls.ok());
  EXPECT_EQ(*calls, (std::vector<int>{1, 3, 5, 6, 7}));
  EXPECT_FALSE(ParseCallList("0").ok());
  EXPECT_FALSE(ParseCallList("2-1").ok());
  EXPECT_FALSE(ParseCallList("x").ok());
  EXPECT_FALSE(ParseCallList(",").ok());
}

}  // namespace
}  // namespace trace::replayer
