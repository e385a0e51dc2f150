#include "engine/fingerprint.h"

#include <sys/utsname.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "engine/cuda/cuda_engine.h"
#include "kernels/kernels.h"

namespace trace::engine {
namespace {

// The value of the first /proc/cpuinfo line starting with `key`.
std::string CpuInfoField(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string v = line.substr(colon + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

std::vector<std::string> KernelCpuFlags() {
  std::istringstream words(CpuInfoField("flags"));
  std::vector<std::string> present;
  for (std::string w; words >> w;) present.push_back(w);
  std::vector<std::string> out;
  for (const char* f : {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                        "avx512_bf16", "avx512_fp16"}) {
    for (const std::string& p : present) {
      if (p == f) {
        out.push_back(f);
        break;
      }
    }
  }
  return out;
}

std::string Os() {
  struct utsname u {};
  if (uname(&u) != 0) return "";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

}  // namespace

MachineFingerprint ReadMachineFingerprint() {
  MachineFingerprint m;
  m.cpu_model = CpuInfoField("model name");
  m.cpu_flags = KernelCpuFlags();
  m.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  m.os = Os();
  m.cpu_isa_path = kernels::CpuIsaPathName(kernels::Impl::kAuto);
  m.cuda = ReadCudaStackInfo();
  return m;
}

EngineDeviceFingerprint DescribeEngineDevice(const Engine& engine) {
  EngineDeviceFingerprint d;
  const EngineOptions& o = engine.options();
  d.device = o.device;
  d.description = engine.DeviceDescription();
  d.cpu_model = CpuInfoField("model name");
  d.cpu_flags = KernelCpuFlags();
  d.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  d.os = Os();
  if (!IsCudaDevice(o.device)) {
    d.kernel_path = kernels::CpuIsaPathName(o.impl);
    return d;
  }
  d.kernel_path = "cuda";
  const kernels::CudaStack stack = ReadCudaStackInfo();
  auto ordinal = ParseCudaDevice(o.device);
  for (const kernels::CudaDeviceInfo& g : stack.devices) {
    if (ordinal.ok() && g.ordinal == *ordinal) {
      d.gpu_name = g.name;
      d.gpu_compute_capability = g.compute_capability;
      d.gpu_memory_bytes = g.memory_bytes;
    }
  }
  d.gpu_driver_version = stack.driver_release.empty()
                             ? "CUDA " + stack.driver_cuda
                             : stack.driver_release + " (CUDA " + stack.driver_cuda + ")";
  d.cuda_runtime_version = stack.runtime_version;
  d.cublas_version = stack.cublas_version;
  return d;
}

}  // namespace trace::engine
