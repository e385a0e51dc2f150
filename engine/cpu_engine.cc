// Engine::Create: the CPU engine (the decoder graph of engine/graph over CpuOps), or the CUDA
// engine for a "cuda[:N]" device (engine/cuda/cuda_engine.h).
#include <thread>

#include "engine/cpu/cpu_ops.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/engine.h"
#include "engine/graph/decoder_engine.h"

namespace trace::engine {

Result<std::unique_ptr<Engine>> Engine::Create(std::shared_ptr<const Model> model,
                                               const EngineOptions& options) {
  if (model == nullptr) return InvalidArgument("engine: no model");
  if (IsCudaDevice(options.device)) {
    return CreateCudaEngine(std::move(model), options);
  }
  if (options.device != "cpu") {
    return InvalidArgument("unknown device '" + options.device +
                           "' (expected cpu, cuda or cuda:N)");
  }
  if (options.threads < 0) return InvalidArgument("engine: threads must be >= 0");
  EngineOptions resolved = options;
  resolved.max_context = graph::ClampContext(options.max_context, model->config());
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  resolved.threads = threads < 1 ? 1 : threads;
  auto ops = std::make_unique<CpuOps>(model, resolved);
  return std::unique_ptr<Engine>(
      new graph::DecoderEngine<CpuOps>(std::move(model), resolved, std::move(ops)));
}

}  // namespace trace::engine
