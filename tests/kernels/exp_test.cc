// The engine Exp (docs/numerics.md, "Exp"): accuracy against std::exp in double, the
// special cases, and every SIMD path (AVX2, AVX-512, NEON) equal to the scalar definition bit for
// bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "tests/kernels/test_util.h"

namespace trace::kernels {
namespace {

using testing::Bits;

// Error of `got` in units of the float ulp at the correctly rounded result.
double UlpError(float got, double exact) {
  const float rounded = static_cast<float>(exact);
  if (rounded == 0.0f) return got == 0.0f ? 0.0 : std::fabs(got) / std::ldexp(1.0, -149);
  const double ulp = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

// Every 97th float from -104 to 89 (about 10 million inputs spread over the range).
std::vector<float> SweepInputs() {
  std::vector<float> xs;
  const uint32_t lo_neg = Bits(-104.0f), hi_pos = Bits(89.0f);
  for (uint32_t b = 0x80000000u; b <= lo_neg; b += 97) {
    float f;
    std::memcpy(&f, &b, 4);
    xs.push_back(f);
  }
  for (uint32_t b = 0; b <= hi_pos; b += 97) {
    float f;
    std::memcpy(&f, &b, 4);
    xs.push_back(f);
  }
  return xs;
}

TEST(KernelsExp, MaxUlpErrorAgainstDouble) {
  // Stated bound (docs/numerics.md): below 1 ulp (faithful) for normal results, where exp(x)
  // >= FLT_MIN; in the subnormal range at most 1 unit of 2^-149 (one extra rounding).
  double max_normal = 0, max_subnormal = 0;
  float worst = 0;
  for (float x : SweepInputs()) {
    const double exact = std::exp(static_cast<double>(x));
    if (exact > std::numeric_limits<float>::max()) {
      EXPECT_EQ(Exp(x), INFINITY) << x;
      continue;
    }
    const double err = UlpError(Exp(x), exact);
    if (exact >= std::numeric_limits<float>::min()) {
      if (err > max_normal) {
        max_normal = err;
        worst = x;
      }
    } else {
      max_subnormal = std::max(max_subnormal, err);
    }
  }
  std::printf("Exp max error: %.3f ulp (normal, at x = %a), %.3f (subnormal)\n", max_normal, worst,
              max_subnormal);
  EXPECT_LE(max_normal, 1.0) << "at x = " << worst;
  EXPECT_LE(max_subnormal, 1.0);
}

TEST(KernelsExp, SpecialCases) {
  EXPECT_EQ(Bits(Exp(-INFINITY)), Bits(0.0f));
  EXPECT_EQ(Bits(Exp(-200.0f)), Bits(0.0f));
  EXPECT_EQ(Bits(Exp(-104.5f)), Bits(0.0f));
  EXPECT_EQ(Exp(100.0f), INFINITY);
  EXPECT_EQ(Exp(INFINITY), INFINITY);
  EXPECT_EQ(Exp(88.8f), INFINITY);
  EXPECT_TRUE(std::isfinite(Exp(88.72f)));
  EXPECT_TRUE(std::isnan(Exp(NAN)));
  EXPECT_EQ(Exp(0.0f), 1.0f);
  EXPECT_EQ(Exp(-0.0f), 1.0f);
  EXPECT_GT(Exp(-103.0f), 0.0f);  // subnormal, not flushed
}

TEST(KernelsExp, EverySimdPathEqualsScalarBitwise) {
  std::vector<float> xs = SweepInputs();
  for (float s : {-INFINITY, INFINITY, NAN, -200.0f, 100.0f, 88.72283172607421875f,
                  88.7228393554687f, -104.0f, -103.97f, 0.0f, -0.0f, 1e-30f, -1e-30f}) {
    xs.push_back(s);
  }
  while (xs.size() % 16 != 11) xs.push_back(0.5f);  // exercise the scalar tails too
  if (testing::SimdPaths().empty()) GTEST_SKIP() << "no SIMD path on this CPU";
  for (Impl impl : testing::SimdPaths()) {
    KernelContext ctx;
    ctx.impl = impl;
    std::vector<float> vec(xs.size());
    ExpArray(ctx, xs.data(), static_cast<int64_t>(xs.size()), vec.data());
    for (size_t i = 0; i < xs.size(); ++i) {
      const float scalar = Exp(xs[i]);
      if (std::isnan(scalar)) {
        ASSERT_TRUE(std::isnan(vec[i])) << xs[i] << " " << CpuIsaPathName(impl);
      } else {
        ASSERT_EQ(Bits(scalar), Bits(vec[i])) << "x = " << xs[i] << " " << CpuIsaPathName(impl);
      }
    }
  }
}

}  // namespace
}  // namespace trace::kernels
