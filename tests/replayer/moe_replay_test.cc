// Replay of runs recorded on a mixture-of-experts model (qwen3-moe-tiny): a run recorded by
// `trace record` replays bit for bit, alone and batched with companions; a replay on a model
// with one expert's weights changed diverges where fresh generation does and names the layer
// of that expert from the recorded layer digests.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "replayer/replayer.h"
#include "replayer/report.h"
#include "tests/replayer/replay_test_fixture.h"
#include "tests/replayer/replay_test_util.h"

namespace trace::replayer {
namespace {

using testing::AgentInputs;
using testing::TempDir;

// Expert 3 of layer 1: the edit shows only in that layer's output.
constexpr int kChangedLayer = 1;
const char* kChangedTensor = "model.layers.1.mlp.experts.3.down_proj.weight";

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
  }
  static void TearDownTestSuite() { delete dir_; }

  static int RunTrace(const std::string& args, std::string* out, std::string* err) {
    return testing::RunTraceBinary(args, dir_->path(), out, err);
  }

  static TempDir* dir_;
  static std::string model_dir_;
  static std::string changed_dir_;
};

TempDir* MoeReplayTest::dir_ = nullptr;
std::string MoeReplayTest::model_dir_;
std::string MoeReplayTest::changed_dir_;

TEST_F(MoeReplayTest, RecordedAgentOnMoeModelReplaysBitwiseThroughTheCli) {
  const std::string db = dir_->file("recorded.db");
  const std::string agent = std::string(TRACE_SOURCE_DIR) + "/examples/support_agent/agent.py";
  std::string out, err;
  int rc = RunTrace("--store " + db + " -q record --model " + model_dir_ + " -- python3 " + agent +
                        " --turns 2 --max-tokens 10",
                    &out, &err);
  ASSERT_EQ(rc, 0) << err << out;
  auto store = store::Store::Open(db);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  const std::string id = (*runs)[0].run_id;
  ASSERT_GT((*runs)[0].model_calls, 0);

  rc = RunTrace("--store " + db + " replay " + id + " --json", &out, &err);
  EXPECT_EQ(rc, 0) << err << out;
  auto json = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << out;
  EXPECT_EQ(json["level"], "bitwise") << out;
  EXPECT_EQ(json["tokens_verified"], (*runs)[0].sampled_tokens);

  // Batched with companion sequences: every row is routed on its own hidden state alone.
  rc = RunTrace("--store " + db + " replay " + id.substr(0, 12) + " --batch 4", &out, &err);
  EXPECT_EQ(rc, 0) << err << out;
  EXPECT_NE(out.find("result: bitwise"), std::string::npos) << out;
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
}

}  // namespace
}  // namespace trace::replayer
