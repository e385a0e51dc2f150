// Runs everywhere the CUDA backend is built, GPU or not: asking for CUDA gives a one-line
// error naming the device and the reason — no device present, a device that does not
// exist, a malformed device string — never a crash. (Exit 0 = pass, 1 = fail; no skip.)
#include <cstdio>
#include <string>

#include "engine/cuda/cuda_engine.h"
#include "kernels/cuda/device.h"

namespace {

int failures = 0;

void Expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

}  // namespace

int main() {
  using trace::engine::CreateCudaEngine;
  using trace::engine::EngineOptions;
  Expect(trace::engine::HaveCudaBackend(), "this build has the CUDA backend");
  auto parsed = trace::engine::ParseCudaDevice("cuda:3");
  Expect(parsed.ok() && *parsed == 3, "cuda:3 parses to ordinal 3");
  Expect(!trace::engine::ParseCudaDevice("cuda:").ok(), "'cuda:' is rejected");
  Expect(!trace::engine::ParseCudaDevice("cuda:1x").ok(), "'cuda:1x' is rejected");
  Expect(trace::engine::IsCudaDevice("cuda") && trace::engine::IsCudaDevice("cuda:0") &&
             !trace::engine::IsCudaDevice("cpu"),
         "IsCudaDevice");

  // The device is checked before the model, so a null model reaches the device errors.
  const int devices = trace::kernels::cuda::CudaDeviceCount();
  std::printf("CUDA devices: %d\n", devices);
  if (devices == 0) {
    auto st = trace::kernels::cuda::UseCudaDevice(0);
    Expect(!st.ok() && st.code() == trace::StatusCode::kUnavailable &&
               st.message() == "no CUDA device is present",
           "UseCudaDevice(0) without a device: '" + st.ToString() + "'");
    auto buffer = trace::kernels::cuda::DeviceBuffer::Allocate(1024, "probe buffer");
    Expect(!buffer.ok() && buffer.status().message().find("probe buffer") != std::string::npos,
           "allocation without a device names the buffer: '" + buffer.status().ToString() + "'");
  } else {
    auto st = trace::kernels::cuda::UseCudaDevice(devices + 5);
    Expect(
        !st.ok() && st.message().find("cuda:" + std::to_string(devices + 5)) != std::string::npos,
        "a missing ordinal is named: '" + st.ToString() + "'");
  }
  EngineOptions options;
  options.device = "cuda";
  auto engine = CreateCudaEngine(nullptr, options);
  if (devices == 0) {
    Expect(!engine.ok() && engine.status().code() == trace::StatusCode::kUnavailable &&
               engine.status().message() ==
                   "CUDA was asked for (--device cuda) but no CUDA device is present",
           "CreateCudaEngine without a device: '" + engine.status().ToString() + "'");
  } else {
    Expect(!engine.ok(),
           "CreateCudaEngine without a model fails: '" + engine.status().ToString() + "'");
  }
  options.device = "cuda:x";
  auto bad = CreateCudaEngine(nullptr, options);
  Expect(!bad.ok() && bad.status().code() == trace::StatusCode::kInvalidArgument &&
             bad.status().message().find("cuda:x") != std::string::npos,
         "a malformed device is named: '" + bad.status().ToString() + "'");
  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
