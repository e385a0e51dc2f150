// ParseCudaDevice: shared by the CUDA engine and the no-CUDA fallback.
#include <cstdlib>

#include "engine/cuda/cuda_engine.h"

namespace trace::engine {

Result<int> ParseCudaDevice(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() <= 8) {
    int ordinal = 0;
    for (size_t i = 5; i < device.size(); ++i) {
      if (device[i] < '0' || device[i] > '9') {
        return InvalidArgument("device '" + device + "': expected cuda or cuda:N");
      }
      ordinal = ordinal * 10 + (device[i] - '0');
    }
    return ordinal;
  }
  return InvalidArgument("device '" + device + "': expected cuda or cuda:N");
}

}  // namespace trace::engine
