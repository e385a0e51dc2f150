// The engine's exp on the device: kernels/cpu/ref_exp.cc transcribed operation for
// operation with explicitly rounded intrinsics (docs/numerics.md, "Exp"). Internal.
#pragma once

#include <cuda_runtime.h>

namespace trace::kernels::cuda::detail {

__device__ __forceinline__ float DeviceExp(float x) {
  if (isnan(x)) return x;
  if (x > 0x1.62e42ep+6f) return __int_as_float(0x7f800000);  // +inf
  if (x < -0x1.ap+6f) return 0.0f;
  const float k = rintf(__fmul_rn(x, 0x1.715476p+0f));  // round half to even, as nearbyint
  float r = __fmaf_rn(k, -0x1.62e430p-1f, x);
  r = __fmaf_rn(k, 0x1.05c610p-29f, r);
  float p = 0x1.a01a02p-13f;
  p = __fmaf_rn(p, r, 0x1.6c16c2p-10f);
  p = __fmaf_rn(p, r, 0x1.111112p-7f);
  p = __fmaf_rn(p, r, 0x1.555556p-5f);
  p = __fmaf_rn(p, r, 0x1.555556p-3f);
  p = __fmaf_rn(p, r, 0x1.0p-1f);
  p = __fmaf_rn(p, r, 0x1.0p+0f);
  p = __fmaf_rn(p, r, 0x1.0p+0f);
  const int ki = static_cast<int>(k);
  const int k1 = ki >> 1;
  const int k2 = ki - k1;
  const float s1 = __int_as_float(static_cast<int>(static_cast<unsigned int>(k1 + 127) << 23));
  const float s2 = __int_as_float(static_cast<int>(static_cast<unsigned int>(k2 + 127) << 23));
  return __fmul_rn(__fmul_rn(p, s1), s2);
}

}  // namespace trace::kernels::cuda::detail
