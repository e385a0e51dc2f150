#include "engine/fingerprint.h"

#include <sys/utsname.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/cuda/cuda_engine.h"
#include "kernels/kernels.h"

namespace trace::engine {
namespace {

// The value of the first line of `cpuinfo` whose key (before the colon, trimmed) is `key`.
std::string CpuInfoField(const std::string& cpuinfo, const std::string& key) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name != key) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

std::string ReadCpuInfo() {
  std::ifstream in("/proc/cpuinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Os() {
  struct utsname u {};
  if (uname(&u) != 0) return "";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

}  // namespace

std::string CpuModelFromCpuInfo(const std::string& cpuinfo) {
  std::string model = CpuInfoField(cpuinfo, "model name");
  if (!model.empty()) return model;
  const std::string implementer = CpuInfoField(cpuinfo, "CPU implementer");
  if (implementer.empty()) return "";
  model = "arm implementer " + implementer;
  for (const char* field : {"part", "variant", "revision"}) {
    const std::string v = CpuInfoField(cpuinfo, std::string("CPU ") + field);
    if (!v.empty()) model += std::string(" ") + field + " " + v;
  }
  return model;
}

std::vector<std::string> KernelCpuFlagsFromCpuInfo(const std::string& cpuinfo) {
  std::string listed = CpuInfoField(cpuinfo, "flags");
  if (listed.empty()) listed = CpuInfoField(cpuinfo, "Features");  // ARM
  std::istringstream words(listed);
  std::vector<std::string> present;
  for (std::string w; words >> w;) present.push_back(w);
  std::vector<std::string> out;
  for (const char* f :
       {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
        "avx512_fp16", "asimd", "fphp", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm"}) {
    if (std::find(present.begin(), present.end(), f) != present.end()) out.push_back(f);
  }
  return out;
}

MachineFingerprint ReadMachineFingerprint() {
  MachineFingerprint m;
  const std::string cpuinfo = ReadCpuInfo();
  m.cpu_model = CpuModelFromCpuInfo(cpuinfo);
  m.cpu_flags = KernelCpuFlagsFromCpuInfo(cpuinfo);
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
  const std::string cpuinfo = ReadCpuInfo();
  d.cpu_model = CpuModelFromCpuInfo(cpuinfo);
  d.cpu_flags = KernelCpuFlagsFromCpuInfo(cpuinfo);
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
