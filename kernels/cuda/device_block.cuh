// The device side of the block interface of kernels/cuda/schedule/host_block.h: the
// canonical kernels' bodies run through it on the GPU. It only moves values (thread index,
// barrier, warp shuffles); every arithmetic step is in the shared bodies. Internal to the
// CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include "kernels/canonical.h"

namespace trace::kernels::cuda {

struct DeviceBlock {
  template <class T>
  struct Local {
    __device__ explicit Local(const DeviceBlock&) {}
    __device__ T& operator[](int) { return value; }
    T value;
  };

  __device__ int threads() const { return static_cast<int>(blockDim.x); }
  // The memory itself: the host block's checked pointer (host_block.h) is for the race check.
  template <class T>
  __device__ __forceinline__ T* Shared(T* p, int64_t, const char*) {
    return p;
  }
  template <class F>
  __device__ __forceinline__ void ForEachThread(F&& f) {
    f(static_cast<int>(threadIdx.x));
  }
  __device__ __forceinline__ void Barrier() { __syncthreads(); }
  // Every lane of the warp must call this (uniform control flow across the warp).
  template <class Get>
  __device__ __forceinline__ void WarpGather(int tid, Get&& get, float (&out)[canonical::kLanes]) {
    const float v = get(tid);
#pragma unroll
    for (int l = 0; l < canonical::kLanes; ++l) out[l] = __shfl_sync(0xffffffffu, v, l);
  }
};

}  // namespace trace::kernels::cuda
