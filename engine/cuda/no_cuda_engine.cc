// CreateCudaEngine in a build without the CUDA backend (TRACE_HAVE_CUDA off): a clear error.
#include "engine/cuda/cuda_engine.h"

namespace trace::engine {

bool HaveCudaBackend() {
  return false;
}

Result<std::unique_ptr<Engine>> CreateCudaEngine(std::shared_ptr<const Model> model,
                                                 const EngineOptions& options) {
  TRACE_ASSIGN_OR_RETURN(int ordinal, ParseCudaDevice(options.device));
  (void)ordinal;
  return Unavailable("CUDA was asked for (--device " + options.device +
                     ") but this build has no CUDA backend");
}

Result<CudaEngineStats> GetCudaEngineStats(Engine& engine) {
  return InvalidArgument("not a CUDA engine (this build has no CUDA backend): " +
                         engine.DeviceDescription());
}

kernels::CudaStack ReadCudaStackInfo() {
  kernels::CudaStack stack;
  stack.error = "this build has no CUDA backend";
  return stack;
}

Result<std::vector<kernels::SelfTestResult>> RunCudaKernelSelfTest(int ordinal) {
  return Unavailable("CUDA self-test on cuda:" + std::to_string(ordinal) +
                     ": this build has no CUDA backend");
}

}  // namespace trace::engine
