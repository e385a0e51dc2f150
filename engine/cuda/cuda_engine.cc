// CreateCudaEngine: the decoder graph (engine/graph) over CudaOps, and what a CUDA engine can
// report about itself (graph statistics, the CUDA stack's versions).
#include "engine/cuda/cuda_engine.h"

#include "engine/cuda/cuda_ops.h"
#include "engine/graph/decoder_engine.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/selftest.h"

namespace trace::engine {

bool HaveCudaBackend() {
  return true;
}

Result<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                 const EngineOptions& options) {
  TRACE_ASSIGN_OR_RETURN(int ordinal, ParseCudaDevice(options.device));
  if (kernels::cuda::CudaDeviceCount() == 0) {
    return Unavailable("CUDA was asked for (--device " + options.device +
                       ") but no CUDA device is present");
  }
  if (model == nullptr) return InvalidArgument("engine: no model");
  EngineOptions resolved = options;
  resolved.max_context = graph::ClampContext(options.max_context, model->config());
  resolved.threads = 1;  // host threads play no part in the device's arithmetic
  auto ops = CudaOps::Create(model, resolved, ordinal);
  if (!ops.ok()) return ops.status().WithContext("CUDA engine on " + options.device);
  return std::unique_ptr<Engine>(
      new graph::DecoderEngine<CudaOps>(std::move(model), resolved, std::move(ops).value()));
}

Result<CudaEngineStats> GetCudaEngineStats(Engine& engine) {
  auto* cuda = dynamic_cast<graph::DecoderEngine<CudaOps>*>(&engine);
  if (cuda == nullptr) return InvalidArgument("not a CUDA engine: " + engine.DeviceDescription());
  const cuda::GraphStats& g = cuda->ops().graph_stats();
  CudaEngineStats stats;
  stats.graphs_enabled = g.enabled;
  stats.graph_captures = g.captures;
  stats.graph_replays = g.replays;
  stats.direct_passes = g.direct_passes;
  stats.kernels_per_graph = g.kernels_per_graph;
  stats.graphs_disabled_because = g.disabled_because;
  return stats;
}

kernels::CudaStack ReadCudaStackInfo() {
  return kernels::cuda::ReadCudaStack();
}

Result<std::vector<kernels::SelfTestResult>> RunCudaKernelSelfTest(int ordinal) {
  return kernels::cuda::RunCudaSelfTest(ordinal);
}

}  // namespace trace::engine
