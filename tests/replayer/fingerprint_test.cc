// Fingerprints say in advance whether a replay can be bitwise: a run recorded on another
// stack (here a GPU one, claimed in its header) replayed on this CPU names every field that
// changed — the device, the kernel path, the GPU, its compute capability, driver, runtime and
// cuBLAS — each as "same contract, different path" (both sides ran the canonical contract),
// and this engine describes its own kernel path and device.
#include <gtest/gtest.h>

#include <set>

#include "engine/fingerprint.h"
#include "kernels/kernels.h"
#include "replayer/replayer.h"
#include "replayer/report.h"
#include "testkit/replay_test_util.h"

namespace trace::replayer {
namespace {

TEST(ReplayFingerprint, EveryDifferenceFromTheRecordingIsNamed) {
  testing::TempDir dir;
  const std::string model_dir = dir.file("model");
  ASSERT_TRUE(engine::InitModel("tiny", 11, model_dir).ok());
  auto model = engine::Model::Load(model_dir, /*hash_weights=*/true);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  engine::EngineOptions options;
  options.threads = 2;
  auto cpu = engine::Engine::Create(*model, options);
  ASSERT_TRUE(cpu.ok());
  auto tokenizer = engine::Tokenizer::Load(model_dir + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  auto store = store::Store::Open(dir.file("traces.db"));
  ASSERT_TRUE(store.ok());

  // This engine's own description: the kernel path kAuto takes here, no GPU fields.
  const engine::EngineDeviceFingerprint here = engine::DescribeEngineDevice(**cpu);
  EXPECT_EQ(here.kernel_path, kernels::CpuIsaPathName(kernels::Impl::kAuto));
  EXPECT_EQ(here.device, "cpu");
  EXPECT_TRUE(here.gpu_name.empty() && here.cublas_version.empty());

  auto run = testing::RunScriptedAgent(**cpu, **tokenizer, testing::AgentInputs{});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // The same run, claimed to come from an H100 with another CUDA stack.
  run->header.mutable_engine()->set_kernel_impl("cuda");
  auto* d = run->header.mutable_device();
  d->set_device("cuda:0");
  d->set_description("cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)");
  d->set_gpu_name("NVIDIA H100 80GB HBM3");
  d->set_gpu_compute_capability("9.0");
  d->set_gpu_driver_version("570.86.15 (CUDA 12.8)");
  d->set_cuda_runtime_version("12.8");
  d->set_cublas_version("12.8.3");
  auto id = testing::WriteRun(**store, *run);
  ASSERT_TRUE(id.ok()) << id.status().ToString();

  ReplayOptions replay;
  replay.threads = 2;
  auto report = ReplayRun(**store, *id, replay);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::set<std::string> named;
  for (const auto& diff : report->fingerprint_differences) named.insert(diff.field);
  for (const char* field :
       {"engine.kernel_impl", "device.device", "device.description", "device.gpu_name",
        "device.gpu_compute_capability", "device.gpu_driver_version", "device.cuda_runtime_version",
        "device.cublas_version"}) {
    EXPECT_TRUE(named.count(field)) << field << " not named:\n" << RenderReplayText(*report);
  }
  // One canonical contract on both sides: every difference is where the arithmetic ran.
  for (const auto& diff : report->fingerprint_differences) {
    EXPECT_TRUE(diff.same_contract) << diff.field;
  }
  EXPECT_NE(RenderReplayText(*report).find(
                "same contract (" +
                std::string(kernels::VersionedNumericsName(kernels::Numerics::kCanonical)) +
                "), different path"),
            std::string::npos)
      << RenderReplayText(*report);
  EXPECT_TRUE(ReplayJson(*report)["fingerprint_differences"][0]["same_contract"].get<bool>());
  // Canonical numerics: the CPU still reproduces the (CPU-computed) recording bit for bit.
  EXPECT_EQ(report->level, Level::kBitwise) << RenderReplayText(*report);
  const std::string text = RenderReplayText(*report);
  EXPECT_NE(text.find("NVIDIA H100"), std::string::npos) << text;
  EXPECT_NE(text.find("12.8.3"), std::string::npos) << text;
}

}  // namespace
}  // namespace trace::replayer
