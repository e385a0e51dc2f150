// What a machine has of CUDA, as plain values (no CUDA headers), for fingerprints and
// `trace doctor`: versions of the NVIDIA driver (its release, from NVML when it can be
// loaded, and the CUDA version it supports), the CUDA runtime and cuBLAS a build uses, and
// every device's name, compute capability and size. Filled by kernels::cuda::ReadCudaStack
// (kernels/cuda/device.h) in a CUDA build.
//
// Ownership: values. Thread safety: immutable once filled. Errors: `error` says why a part
// could not be read (no driver, no device, a build without CUDA); `cublas_error` why cuBLAS,
// which is opened at run time, could not be loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trace::kernels {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;                // "NVIDIA H200"
  std::string compute_capability;  // "9.0"
  int sm_count = 0;
  int64_t memory_bytes = 0;
};

struct CudaStack {
  bool backend_built = false;   // this build has the CUDA backend
  std::string driver_release;   // "580.159.03" (NVML), or empty
  std::string driver_cuda;      // "13.0": the newest CUDA the driver supports
  std::string runtime_version;  // "13.0"
  std::string cublas_version;   // "13.0.2", or empty when cuBLAS could not be loaded
  std::string cublas_error;     // why cuBLAS could not be loaded (kernels/cuda/cublas_loader.h)
  std::vector<CudaDeviceInfo> devices;
  std::string error;
};

}  // namespace trace::kernels
