// Device discovery, device memory and streams for the CUDA backend.
//
// Ownership: DeviceBuffer and Stream own their allocation / stream and release it in the
// destructor (move-only). Thread safety: a buffer or stream is used by one thread at a
// time; the free functions are reentrant. Errors: every fallible call returns a Status
// naming the CUDA call, file and line (cuda_check.h); "no device" is kUnavailable.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/cuda_info.h"

namespace trace::kernels::cuda {

// Number of usable CUDA devices: 0 (not an error) when there is no device or the driver
// is missing or too old for this build.
int CudaDeviceCount();

// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)", or the error that prevents using `ordinal`.
Result<std::string> CudaDeviceDescription(int ordinal);

// The CUDA stack of this machine (kernels/cuda_info.h). Never fails: what cannot be read
// stays empty and CudaStack::error says why.
kernels::CudaStack ReadCudaStack();

// Makes `ordinal` the current device of the calling thread, with a clear error when it
// does not exist.
Status UseCudaDevice(int ordinal);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // `what` names the buffer in the out-of-memory error ("layer 3 k cache").
  static Result<DeviceBuffer> Allocate(size_t bytes, const std::string& what);

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream() = default;
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  static Result<Stream> Create();
  cudaStream_t get() const { return stream_; }
  Status Synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// Synchronous copies (the null stream's ordering), each naming the call on failure.
Status CopyToDevice(void* dst, const void* src, size_t bytes);
Status CopyToHost(void* dst, const void* src, size_t bytes);
// Asynchronous on `stream`; `src`/`dst` host memory must stay valid until the stream
// reaches the copy.
Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream);
Status CopyToHostAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream);
Status CopyDeviceToDeviceAsync(void* dst, const void* src, size_t bytes, cudaStream_t stream);

// The first error of an earlier asynchronous launch on this thread's device, if any.
Status CheckLastLaunch(const char* what);

}  // namespace trace::kernels::cuda
