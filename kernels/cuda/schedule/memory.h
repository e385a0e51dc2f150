// Loads of the CUDA kernels' schedules, host-callable. On the device they use the read-only
// cache (__ldg) and 16-byte vector loads; on the host (CPU simulations) plain loads. Only
// values move here: an exact conversion of a stored weight to f32 is the sole computation,
// and bf16/f16 -> f32 is exact either way (docs/numerics.md section 2).
//
// Ownership: pointers are the caller's. Thread safety: pure. Errors: none (alignment for
// the vector loads is the caller's check, GemvVectorOk).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/canonical.h"
#include "kernels/cuda/schedule/launch.h"
#include "kernels/kernels.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace trace::kernels::cuda::schedule {

template <DType D>
inline constexpr int kElementBytes = D == DType::kF32 ? 4 : 2;

template <class T>
TRACE_HD T LoadRO(const T* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// f32 of the 16 stored bits of a bf16 or f16 weight.
template <DType D>
TRACE_HD float HalfBitsToF32(uint16_t bits) {
  if constexpr (D == DType::kBF16) {
    return canonical::Bf16ToF32(bits);
  } else {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits));  // exact: every f16 is an f32
#else
    return canonical::F16ToF32(bits);
#endif
  }
}

// Element `i` of a weight array in dtype D, as f32.
template <DType D>
TRACE_HD float LoadWeight(const void* base, int64_t i) {
  if constexpr (D == DType::kF32) {
    return LoadRO(static_cast<const float*>(base) + i);
  } else {
    return HalfBitsToF32<D>(LoadRO(static_cast<const uint16_t*>(base) + i));
  }
}

// The 32 weights of a whole block starting at element k0 of `row`, with 16-byte loads
// (row + k0 must be 16-byte aligned).
template <DType D>
TRACE_HD void LoadBlock32(const void* row, int64_t k0, float (&w)[32]) {
  if constexpr (D == DType::kF32) {
    const float* p = static_cast<const float*>(row) + k0;
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(p) + i);
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
#else
    std::memcpy(w, p, sizeof(w));
#endif
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(row) + k0;
    uint32_t words[16];
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i);
      words[4 * i] = v.x;
      words[4 * i + 1] = v.y;
      words[4 * i + 2] = v.z;
      words[4 * i + 3] = v.w;
    }
#else
    std::memcpy(words, p, sizeof(words));
#endif
    TRACE_UNROLL
    for (int j = 0; j < 16; ++j) {  // little endian: element 2j is the low half of word j
      w[2 * j] = HalfBitsToF32<D>(static_cast<uint16_t>(words[j] & 0xffffu));
      w[2 * j + 1] = HalfBitsToF32<D>(static_cast<uint16_t>(words[j] >> 16));
    }
  }
}

// 32 consecutive activations from global memory (16-byte aligned), read-only.
TRACE_HD void LoadActivations32(const float* p, float (&v)[32]) {
#if defined(__CUDA_ARCH__)
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 f = __ldg(reinterpret_cast<const float4*>(p) + i);
    v[4 * i] = f.x;
    v[4 * i + 1] = f.y;
    v[4 * i + 2] = f.z;
    v[4 * i + 3] = f.w;
  }
#else
  std::memcpy(v, p, sizeof(v));
#endif
}

// 4 consecutive floats of shared memory (16-byte aligned).
TRACE_HD void LoadShared4(const float* p, float* v) {
#if defined(__CUDA_ARCH__)
  const float4 f = *reinterpret_cast<const float4*>(p);
  v[0] = f.x;
  v[1] = f.y;
  v[2] = f.z;
  v[3] = f.w;
#else
  std::memcpy(v, p, 4 * sizeof(float));
#endif
}
// The same through a CUDA body's checked pointer on the host (host_block.h): four reads.
template <class P, std::enable_if_t<!std::is_pointer_v<P>, int> = 0>
void LoadShared4(const P& p, float* v) {
  for (int i = 0; i < 4; ++i) v[i] = p[i];
}

}  // namespace trace::kernels::cuda::schedule
