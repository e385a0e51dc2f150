// main() of every GPU test binary: skip (exit 77) without a device, else run the
// registered tests (optionally those whose name contains argv[1]) and report each.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "kernels/cuda/device.h"
#include "tests/gpu/gpu_test.h"

int main(int argc, char** argv) {
  using trace::gputest::Registry;
  const int devices = trace::kernels::cuda::CudaDeviceCount();
  if (devices == 0) {
    std::printf("SKIPPED: no CUDA device is present (%zu GPU tests not run)\n", Registry().size());
    return 77;
  }
  auto description = trace::kernels::cuda::CudaDeviceDescription(0);
  std::printf("device: %s\n",
              description.ok() ? description->c_str() : description.status().ToString().c_str());
  const char* filter = argc > 1 ? argv[1] : nullptr;
  int failed = 0;
  int ran = 0;
  for (const auto& test : Registry()) {
    if (filter != nullptr && std::strstr(test.name, filter) == nullptr) continue;
    trace::gputest::CurrentFailed() = false;
    const auto start = std::chrono::steady_clock::now();
    test.fn();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ++ran;
    if (trace::gputest::CurrentFailed()) ++failed;
    std::printf("%s %s (%.0f ms)\n", trace::gputest::CurrentFailed() ? "FAIL" : "PASS", test.name,
                ms);
    std::fflush(stdout);
  }
  std::printf("%d of %d tests passed\n", ran - failed, ran);
  return failed == 0 ? 0 : 1;
}
