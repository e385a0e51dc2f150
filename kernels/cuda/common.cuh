// Device helpers shared by the CUDA kernels: exact weight loads, launch geometry, and the
// canonical lane fold. Internal to kernels/cuda (not a public header).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/kernels.h"

namespace trace::kernels::cuda::detail {

inline constexpr int kLanes = 32;     // canonical lanes
inline constexpr int kBlockLen = 32;  // elements per canonical block

// Exact conversion of one stored weight element to f32 (bf16 and f16 are subsets of f32).
template <DType D>
__device__ __forceinline__ float LoadWeight(const void* base, int64_t i) {
  if constexpr (D == DType::kF32) {
    return __ldg(static_cast<const float*>(base) + i);
  } else if constexpr (D == DType::kBF16) {
    const unsigned short bits = __ldg(static_cast<const unsigned short*>(base) + i);
    return __uint_as_float(static_cast<unsigned int>(bits) << 16);
  } else {
    const __half h = __ushort_as_half(__ldg(static_cast<const unsigned short*>(base) + i));
    return __half2float(h);  // exact: every f16 is an f32
  }
}

// Left fold ((v_lane0 + v_lane1) + v_lane2) + ... + v_lane31 of one value per lane of a
// full warp, the canonical dot's final step, starting from lane 0's value exactly as the
// CPU reference does. Every lane returns the same sum.
__device__ __forceinline__ float WarpLeftFold(float v) {
  float sum = __shfl_sync(0xffffffffu, v, 0);
#pragma unroll
  for (int lane = 1; lane < kLanes; ++lane) {
    sum = __fadd_rn(sum, __shfl_sync(0xffffffffu, v, lane));
  }
  return sum;
}

inline unsigned int CeilDiv(int64_t a, int64_t b) {
  return static_cast<unsigned int>((a + b - 1) / b);
}

}  // namespace trace::kernels::cuda::detail
