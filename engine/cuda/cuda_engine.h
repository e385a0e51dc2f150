// The CUDA backend behind engine::Engine: Engine::Create calls CreateCudaEngine when
// EngineOptions::device is "cuda" or "cuda:N". Built without CUDA, CreateCudaEngine exists
// too and returns the error that says so.
//
// Ownership: the engine holds the shared Model, owns its device copy of the weights
// (uploaded once, bf16 stays bf16), the device KV caches and activations. Thread safety:
// as Engine — one thread drives an engine. Errors: Status naming the device, the CUDA call
// and its file and line: "no CUDA device is present", "CUDA was asked for (--device cuda)
// but this build has no CUDA backend", out of device memory naming the buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "engine/engine.h"
#include "kernels/cuda_info.h"
#include "kernels/selftest.h"

namespace trace::engine {

// True for "cuda" and "cuda:<anything>": the devices CreateCudaEngine answers for.
inline bool IsCudaDevice(const std::string& device) {
  return device == "cuda" || device.rfind("cuda:", 0) == 0;
}

// "cuda" -> 0, "cuda:N" -> N; anything else is an InvalidArgument naming the string.
Result<int> ParseCudaDevice(const std::string& device);

// Whether this build has the CUDA backend (a device may still be absent).
bool HaveCudaBackend();

Result<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                 const EngineOptions& options);

// How a CUDA engine ran its passes so far: each pass's layers as one replayed CUDA graph
// (captured once per pass shape) or as individual kernel launches (graphs off, a layer probe,
// or a capture that failed: the reason is kept).
struct CudaEngineStats {
  bool graphs_enabled = false;
  int64_t graph_captures = 0;
  int64_t graph_replays = 0;
  int64_t direct_passes = 0;
  int64_t kernels_per_graph = 0;  // kernel launches one graph replaces (the last captured)
  std::string graphs_disabled_because;
};
// InvalidArgument for an engine that is not a CUDA engine (or a build without CUDA).
Result<CudaEngineStats> GetCudaEngineStats(Engine& engine);

// This machine's CUDA stack (kernels/cuda_info.h); in a build without CUDA, backend_built is
// false and `error` says so.
kernels::CudaStack ReadCudaStackInfo();

// The canonical-v2 kernel self-test (kernels/selftest.h) on device `ordinal`.
Result<std::vector<kernels::SelfTestResult>> RunCudaKernelSelfTest(int ordinal);

}  // namespace trace::engine
