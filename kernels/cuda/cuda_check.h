// CUDA_CHECK / CUBLAS_CHECK: turn a failing CUDA runtime or cuBLAS call into a Status that
// names the call, the file and the line, returned from the enclosing function. cuBLAS calls
// go through the loaded table (cublas_loader.h): CUBLAS_CHECK(blas.Create(&handle)).
//
// Ownership: macros only. Thread safety: reentrant. Errors: the enclosing function must
// return trace::Status or trace::Result<T>; a failure returns kUnavailable for a missing
// device or driver and kInternal for anything else.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "base/status.h"
#include "kernels/cuda/cublas_loader.h"  // CublasError; cuBLAS is opened at first use

namespace trace::kernels::cuda {

inline Status CudaError(cudaError_t err, const char* call, const char* file, int line) {
  const bool absent = err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
                      err == cudaErrorInvalidDevice;
  std::string msg = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  return absent ? Unavailable(std::move(msg)) : Internal(std::move(msg));
}

}  // namespace trace::kernels::cuda

#define CUDA_CHECK(call)                                                                    \
  do {                                                                                      \
    cudaError_t _trace_cuda_err = (call);                                                   \
    if (_trace_cuda_err != cudaSuccess)                                                     \
      return ::trace::kernels::cuda::CudaError(_trace_cuda_err, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                                     \
  do {                                                                                         \
    cublasStatus_t _trace_cublas_st = (call);                                                  \
    if (_trace_cublas_st != CUBLAS_STATUS_SUCCESS)                                             \
      return ::trace::kernels::cuda::CublasError(_trace_cublas_st, #call, __FILE__, __LINE__); \
  } while (0)
