// Replay across devices (label gpu): a run recorded on the CPU replays bitwise on CUDA, and
// one recorded on CUDA replays bitwise on the CPU. Skipped where no CUDA engine can be
// created (a CPU-only build or no device).
#include <gtest/gtest.h>

#include "replayer/replayer.h"
#include "replayer/report.h"
#include "testkit/replay_test_util.h"

namespace trace::replayer {
namespace {

std::unique_ptr<engine::Engine> MakeEngine(const std::string& dir, const std::string& device) {
  auto model = engine::Model::Load(dir, /*hash_weights=*/true);
  if (!model.ok()) return nullptr;
  engine::EngineOptions options;
  options.device = device;
  auto engine = engine::Engine::Create(*model, options);
  return engine.ok() ? std::move(*engine) : nullptr;
}

TEST(ReplayGpuTest, RunsReplayBitwiseAcrossCpuAndCuda) {
  testing::TempDir dir;
  const std::string model_dir = dir.file("model");
  ASSERT_TRUE(engine::InitModel("tiny", 11, model_dir).ok());
  auto cuda = MakeEngine(model_dir, "cuda");
  if (!cuda) GTEST_SKIP() << "no CUDA engine here";
  auto cpu = MakeEngine(model_dir, "cpu");
  ASSERT_NE(cpu, nullptr);
  auto tokenizer = engine::Tokenizer::Load(model_dir + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  auto store = store::Store::Open(dir.file("traces.db"));
  ASSERT_TRUE(store.ok());

  testing::AgentInputs in;
  in.layer_digests = true;
  struct Case {
    engine::Engine* record_on;
    const char* replay_on;
  };
  for (const Case& c : {Case{cpu.get(), "cuda"}, Case{cuda.get(), "cpu"}}) {
    auto run = testing::RunScriptedAgent(*c.record_on, **tokenizer, in);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    auto id = testing::WriteRun(**store, *run);
    ASSERT_TRUE(id.ok());
    ReplayOptions options;
    options.device = c.replay_on;
    auto report = ReplayRun(**store, *id, options);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->level, Level::kBitwise) << RenderReplayText(*report);
    // The device changed, and the report says so.
    bool device_reported = false;
    for (const auto& d : report->fingerprint_differences) {
      device_reported |= d.field == "device.device";
    }
    EXPECT_TRUE(device_reported) << RenderReplayText(*report);
  }
}

}  // namespace
}  // namespace trace::replayer
