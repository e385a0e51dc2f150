// Replay of runs recorded on a mixture-of-experts model (qwen3-moe-tiny): a run recorded by
// `trace record` replays bit for bit, alone and batched with companions; a replay on a model
// with one expert's weights changed diverges where fresh generation does and names the layer
// of that expert from the recorded layer digests; the recorded routes (expert ids per token
// per MoE layer) replay identical, and a changed router is named with its layer's experts.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "replayer/replayer.h"
#include "replayer/report.h"
#include "testkit/replay_test_util.h"
#include "tests/replayer/replay_test_fixture.h"

namespace trace::replayer {
namespace {

using testing::AgentInputs;
using testing::TempDir;

// Expert 3 of layer 1: the edit shows only in that layer's output.
constexpr int kChangedLayer = 1;
const char* kChangedTensor = "model.layers.1.mlp.experts.3.down_proj.weight";
// The router of layer 1: the edit changes that layer's routes.
const char* kChangedRouter = "model.layers.1.mlp.gate.weight";

class MoeReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    model_dir_ = dir_->file("moe");
    changed_dir_ = dir_->file("moe-changed");
    ASSERT_TRUE(engine::InitModel("qwen3-moe-tiny", 11, model_dir_).ok());
    Status st = testing::CopyModelWithChangedWeight(model_dir_, changed_dir_, kChangedTensor,
                                                    /*index=*/5, /*delta=*/40.0f);
    ASSERT_TRUE(st.ok()) << st.ToString();
    router_dir_ = dir_->file("moe-router");
    st = testing::CopyModelWithChangedWeight(model_dir_, router_dir_, kChangedRouter,
                                             /*index=*/3 * 64 + 5, /*delta=*/60.0f);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  static void TearDownTestSuite() { delete dir_; }

  static int RunTrace(const std::string& args, std::string* out, std::string* err) {
    return testing::RunTraceBinary(args, dir_->path(), out, err);
  }

  static TempDir* dir_;
  static std::string model_dir_;
  static std::string changed_dir_;
  static std::string router_dir_;
};

TempDir* MoeReplayTest::dir_ = nullptr;
std::string MoeReplayTest::model_dir_;
std::string MoeReplayTest::changed_dir_;
std::string MoeReplayTest::router_dir_;

TEST_F(MoeReplayTest, RecordedAgentOnMoeModelReplaysBitwiseThroughTheCli) {
  const std::string db = dir_->file("recorded.db");
  store::RunSummary run;
  ASSERT_NO_FATAL_FAILURE(
      testing::RecordExampleAgent(db, model_dir_, 2, 10, dir_->path(), &run, "--layer-digests"));
  const std::string id = run.run_id;

  // Every sampled token's route was recorded: route_width = MoE layers x experts per token,
  // each layer's experts valid ids in ascending order.
  {
    auto model = engine::Model::Load(model_dir_, false);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const engine::ModelConfig& c = (*model)->config();
    int moe_layers = 0;
    for (int64_t l = 0; l < c.num_layers; ++l) moe_layers += c.IsMoeLayer(l);
    const int width = moe_layers * static_cast<int>(c.num_experts_per_tok);
    auto store = store::Store::Open(db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto events = (*store)->LoadEvents(id);
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    int calls = 0;
    for (const proto::Event& e : *events) {
      if (!e.has_llm_call() || e.llm_call().token_ids_size() == 0) continue;
      const proto::LlmCall& call = e.llm_call();
      ++calls;
      ASSERT_EQ(call.route_width(), width);
      ASSERT_EQ(call.route_ids_size(), call.token_ids_size() * width);
      for (int i = 0; i < call.route_ids_size(); ++i) {
        EXPECT_GE(call.route_ids(i), 0);
        EXPECT_LT(call.route_ids(i), c.num_experts);
        if (i % c.num_experts_per_tok != 0) {
          EXPECT_LT(call.route_ids(i - 1), call.route_ids(i));
        }
      }
    }
    EXPECT_GT(calls, 0);
  }

  std::string out, err;
  int rc = RunTrace("--store " + db + " replay " + id + " --json", &out, &err);
  EXPECT_EQ(rc, 0) << err << out;
  auto json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  EXPECT_EQ(json["level"], "bitwise") << out;
  EXPECT_EQ(json["tokens_verified"], run.sampled_tokens);
  EXPECT_EQ(json["routes_checked"], run.sampled_tokens) << out;
  EXPECT_EQ(json["routes_differ"], 0) << out;

  // Batched with companion sequences: every row is routed on its own hidden state alone.
  rc = RunTrace("--store " + db + " replay " + id.substr(0, 12) + " --batch 4", &out, &err);
  EXPECT_EQ(rc, 0) << err << out;
  EXPECT_NE(out.find("result: bitwise"), std::string::npos) << out;
  EXPECT_NE(out.find("expert routes identical at"), std::string::npos) << out;

  // On the model with one expert's weights changed: the first differing layer is that
  // expert's layer. The routes up to and including it are the recorded ones (its router ran
  // before the expert); a route that differs does so in a later layer.
  rc = RunTrace("--store " + db + " replay " + id + " --model " + changed_dir_ + " --json", &out,
                &err);
  EXPECT_NE(rc, 0) << err << out;
  json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  EXPECT_EQ(json["level"], "diverged") << out;
  const auto& d = json["first_divergence"];
  ASSERT_TRUE(d.is_object()) << out;
  EXPECT_EQ(d["layer_digests_recorded"], true);
  EXPECT_EQ(d["first_differing_layer"], kChangedLayer) << out;
  EXPECT_GT(json["routes_checked"].get<int>(), 0) << out;
  for (const auto& call : json["calls"]) {
    const auto& rd = call["first_route_difference"];
    if (rd.is_null()) continue;
    EXPECT_GT(rd["layer"].get<int>(), kChangedLayer) << out;
  }
}

TEST_F(MoeReplayTest, ChangedExpertWeightNamesItsLayer) {
  auto store = store::Store::Open(dir_->file("traces.db"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto tok = engine::Tokenizer::Load(model_dir_ + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  AgentInputs in;
  in.layer_digests = true;
  in.max_tokens = 24;
  auto engine = testing::MakeEngine(model_dir_);
  auto run = testing::RunScriptedAgent(*engine, **tok, in);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto id = testing::WriteRun(**store, *run);
  ASSERT_TRUE(id.ok()) << id.status().ToString();

  ReplayOptions same;
  auto bitwise = ReplayRun(**store, *id, same);
  ASSERT_TRUE(bitwise.ok()) << bitwise.status().ToString();
  EXPECT_EQ(bitwise->level, Level::kBitwise) << RenderReplayText(*bitwise);

  ReplayOptions options;
  options.model_dir = changed_dir_;
  auto report = ReplayRun(**store, *id, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->level, Level::kDiverged) << RenderReplayText(*report);
  const Divergence* d = report->first_divergence();
  ASSERT_NE(d, nullptr) << RenderReplayText(*report);
  EXPECT_TRUE(d->layer_digests_recorded);
  EXPECT_EQ(d->first_differing_layer, kChangedLayer) << RenderReplayText(*report);
  ASSERT_FALSE(report->calls.empty());
  EXPECT_GT(report->calls[0].routes_checked, 0);

  // The router of that layer changed: its routes differ and the report names the layer and
  // both expert sets.
  options.model_dir = router_dir_;
  report = ReplayRun(**store, *id, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const CallReport* first = nullptr;
  for (const CallReport& c : report->calls) {
    if (c.first_route_difference) {
      first = &c;
      break;
    }
  }
  ASSERT_NE(first, nullptr) << RenderReplayText(*report);
  const RouteDifference& rd = *first->first_route_difference;
  EXPECT_EQ(rd.layer, kChangedLayer) << RenderReplayText(*report);
  EXPECT_NE(rd.recorded, rd.replayed);
  EXPECT_EQ(rd.recorded.size(), rd.replayed.size());
  EXPECT_GT(report->routes_differ, 0);
  EXPECT_NE(
      RenderReplayText(*report).find("first route difference: call " + std::to_string(first->call) +
                                     ", step " + std::to_string(rd.step) + ", layer 1"),
      std::string::npos)
      << RenderReplayText(*report);
}

}  // namespace
}  // namespace trace::replayer
