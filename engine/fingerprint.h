// What a machine and an engine ran on, for run fingerprints (recorded by the recorder,
// compared by `trace replay`) and `trace doctor`: enough to say in advance whether a replay
// can be bitwise. The CPU model and ISA flags, the kernel path an engine takes (AVX2, AVX-512,
// NEON or the scalar references on CPU, the CUDA kernels on a GPU), and the CUDA stack
// (driver release and CUDA level, runtime, cuBLAS; device name, compute capability, memory).
//
// Ownership: values. Thread safety: the functions are reentrant. Errors: none; what cannot be
// read stays empty (and CudaStack::error says why for CUDA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kernels/cuda_info.h"

namespace trace::engine {

struct MachineFingerprint {
  std::string cpu_model;               // CpuModelFromCpuInfo
  std::vector<std::string> cpu_flags;  // the ISA flags the kernels care about, present here
  int cpu_cores = 0;
  std::string os;            // uname: sysname release machine
  std::string cpu_isa_path;  // what Impl::kAuto runs here: "avx512", "avx2", "neon", "reference"
  kernels::CudaStack cuda;
};

// Reads this machine (the CUDA part only through the CUDA runtime, never failing).
MachineFingerprint ReadMachineFingerprint();

// From the text of /proc/cpuinfo: the CPU's name (x86 "model name"; on ARM, which has none,
// "arm implementer 0x41 part 0xd0c variant 0x1 revision 1" from the CPU ID fields), and the
// ISA flags of interest to the kernels it lists (x86 "flags": AVX2, AVX-512 ...; ARM
// "Features": asimd, fphp, sve ...), in a fixed order. Empty when absent.
std::string CpuModelFromCpuInfo(const std::string& cpuinfo);
std::vector<std::string> KernelCpuFlagsFromCpuInfo(const std::string& cpuinfo);

// The device an engine runs its kernels on.
struct EngineDeviceFingerprint {
  std::string device;       // EngineOptions::device: "cpu" | "cuda:0"
  std::string description;  // Engine::DeviceDescription()
  std::string kernel_path;  // "avx512" | "avx2" | "neon" | "reference" | "cuda"
  std::string cpu_model;
  std::vector<std::string> cpu_flags;
  int cpu_cores = 0;
  std::string os;
  // The GPU's, for a CUDA engine; empty on CPU.
  std::string gpu_name;
  std::string gpu_compute_capability;
  std::string gpu_driver_version;  // "580.159.03 (CUDA 13.0)"
  std::string cuda_runtime_version;
  std::string cublas_version;
  int64_t gpu_memory_bytes = 0;
};

EngineDeviceFingerprint DescribeEngineDevice(const Engine& engine);

}  // namespace trace::engine
