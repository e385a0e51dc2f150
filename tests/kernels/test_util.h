// Helpers shared by the kernel tests: seeded random data, weights in each dtype, and
// bitwise comparison that names the first differing element.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"

namespace trace::kernels::testing {

inline std::vector<float> RandomVector(std::mt19937_64& rng, int64_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// A weight matrix stored in `dtype`, plus its exact f32 values.
struct TestWeights {
  DType dtype;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // f32 of every stored element
  WeightView view() const { return WeightView{bytes.data(), dtype, rows, cols}; }
};

inline TestWeights RandomWeights(std::mt19937_64& rng, DType dtype, int64_t rows, int64_t cols,
                                 float scale = 0.1f) {
  TestWeights w{dtype, rows, cols, {}, {}};
  const std::vector<float> raw = RandomVector(rng, rows * cols, scale);
  w.bytes.resize(static_cast<size_t>(rows * cols) * DTypeSize(dtype));
  w.values.resize(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(w.bytes.data() + 4 * i, &raw[i], 4);
      w.values[i] = raw[i];
    } else {
      const uint16_t h = dtype == DType::kBF16 ? F32ToBf16RoundNearestEven(raw[i])
                                               : F32ToF16RoundNearestEven(raw[i]);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
      w.values[i] = dtype == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
    }
  }
  return w;
}

inline KernelContext Ctx(Impl impl, Numerics numerics = Numerics::kCanonical,
                         ThreadPool* pool = nullptr) {
  KernelContext ctx;
  ctx.impl = impl;
  ctx.numerics = numerics;
  ctx.pool = pool;
  return ctx;
}

// y = MatMul(x [M, w.cols], w) (+ bias), every output first set to NaN.
inline std::vector<float> RunMatMul(const KernelContext& ctx, const std::vector<float>& x,
                                    int64_t M, const WeightView& w, const float* bias) {
  std::vector<float> y(static_cast<size_t>(M * w.rows), NAN);
  MatMul(ctx, x.data(), M, w, bias, y.data());
  return y;
}

// The SIMD paths this machine has (AVX-512 and AVX2 where present), each as the Impl that
// forces it; the scalar reference is what they are held to.
inline std::vector<Impl> SimdPaths() {
  std::vector<Impl> paths;
  for (Impl impl : AvailableCpuIsaPaths()) {
    if (impl != Impl::kReference) paths.push_back(impl);
  }
  return paths;
}

// Each SIMD path's own canonical dot (the one its RmsNorm runs), named, for the paths this
// machine has.
struct NamedDot {
  const char* path;
  float (*dot)(const float* a, const float* b, int64_t n);
};
inline std::vector<NamedDot> SimdDots() {
  std::vector<NamedDot> dots;
#if defined(__x86_64__)
  if (HaveAvx2()) dots.push_back({"avx2", avx2::CanonicalDot});
  if (HaveAvx512()) dots.push_back({"avx512", avx512::CanonicalDot});
#endif
#if defined(__aarch64__)
  dots.push_back({"neon", neon::CanonicalDot});
#endif
  return dots;
}

inline uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Empty when equal, else "element i: a (bits) vs b (bits)".
// The first element where a and b differ, "" when none: every bit, except that any two NaNs
// are equal. Which NaN an operation returns is not in the contract (docs/numerics.md, "NaN"):
// x86 and AArch64 make different default NaNs, and between two NaN operands the one that
// propagates follows the operand order the compiler picked for a commutative operation.
inline std::string FirstBitDifference(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (Bits(a[i]) != Bits(b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]))) {
      return "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " +
             std::to_string(b[i]);
    }
  }
  return "";
}

// One attention call's shape, and the call itself (output NaN-filled first, so that an
// element the kernel does not write shows).
struct AttentionCase {
  int64_t n_heads, n_kv_heads, head_dim, pos;
};

inline std::vector<float> RunAttention(const KernelContext& ctx, const std::vector<float>& q,
                                       const std::vector<float>& k, const std::vector<float>& v,
                                       const AttentionCase& c) {
  std::vector<float> out(static_cast<size_t>(c.n_heads * c.head_dim), NAN);
  std::vector<float> scratch(static_cast<size_t>(2 * (c.pos + 1)));
  Attention(ctx, q.data(), k.data(), v.data(), c.pos, c.n_heads, c.n_kv_heads, c.head_dim,
            canonical::AttentionScale(c.head_dim), scratch.data(), out.data());
  return out;
}

}  // namespace trace::kernels::testing
