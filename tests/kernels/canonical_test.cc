// kernels/canonical.h: the contract's arithmetic written once. Checks that the pinned
// canonical-v2 self-test digests hold on the scalar reference and on the SIMD path, that the
// pieces compose into the contract's dot product, the NaN rule of the max, and that the
// templates run unchanged over a vector arithmetic type (the way AVX2 and AVX-512 use them).
#include "kernels/canonical.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "kernels/selftest.h"
#include "tests/kernels/test_util.h"

namespace trace::kernels {
namespace {

using testing::Bits;
using testing::RandomVector;

TEST(KernelsCanonical, PinnedSelfTestDigestsHoldOnEveryCpuPath) {
  // Every path this machine has (reference, AVX2, AVX-512), each forced, and kAuto.
  std::vector<Impl> paths = AvailableCpuIsaPaths();
  paths.push_back(Impl::kAuto);
  for (Impl impl : paths) {
    KernelContext ctx;
    ctx.impl = impl;
    for (const SelfTestResult& r : RunCpuSelfTest(ctx)) {
      EXPECT_TRUE(r.ok()) << r.name << " (" << CpuIsaPathName(impl) << ")"
                          << ": digest " << std::hex << r.digest << ", pinned " << r.pinned;
    }
  }
}

TEST(KernelsCanonical, SelfTestNoticesAOneBitChange) {
  // The digest covers every bit of an output: a test that could not fail proves nothing.
  std::vector<float> v = {1.0f, 2.0f, 3.0f};
  const uint64_t before = SelfTestDigest(v.data(), 3);
  v[1] = std::nextafter(v[1], 3.0f);
  EXPECT_NE(SelfTestDigest(v.data(), 3), before);
}

TEST(KernelsCanonical, LanePartialsAndFoldAreTheDot) {
  std::mt19937_64 rng(1);
  for (int64_t n : {0, 1, 31, 32, 33, 1023, 1024, 1025, 2100, 33000}) {
    const auto a = RandomVector(rng, n), b = RandomVector(rng, n);
    float lanes[canonical::kLanes];
    float sums[canonical::kLanes];
    for (int l = 0; l < canonical::kLanes; ++l) {
      lanes[l] = canonical::LanePartialDot(a.data(), b.data(), n, l);
      sums[l] = canonical::LanePartialSum(a.data(), n, l);
    }
    const float dot = canonical::Dot(a.data(), b.data(), n);
    EXPECT_EQ(Bits(canonical::FoldLanes(lanes)), Bits(dot)) << n;
    EXPECT_EQ(Bits(canonical::FoldLanes(sums)), Bits(canonical::Sum(a.data(), n))) << n;
    EXPECT_EQ(Bits(dot), Bits(CanonicalDot(a.data(), b.data(), n))) << n;
    // A SIMD path that ran whole blocks first continues with the tail.
    const int64_t head = n / 64 * 32;
    float cont[canonical::kLanes] = {};
    canonical::DotTail(cont, a.data(), b.data(), 0, head);
    canonical::DotTail(cont, a.data(), b.data(), head, n);
    EXPECT_EQ(Bits(canonical::FoldLanes(cont)), Bits(dot)) << n;
    // Strided operands (a column of a matrix) give the same chains.
    std::vector<float> strided(static_cast<size_t>(3 * n));
    for (int64_t k = 0; k < n; ++k) strided[3 * k + 1] = b[k];
    for (int l = 0; l < canonical::kLanes; ++l) {
      ASSERT_EQ(Bits(canonical::LanePartialDot(a.data(), strided.data() + 1, n, l, 1, 3)),
                Bits(lanes[l]));
    }
  }
}

TEST(KernelsCanonical, MaxNanRuleMatchesTheSequentialReference) {
  std::mt19937_64 rng(2);
  const float specials[] = {NAN, 0.0f, -0.0f, INFINITY, -INFINITY, 1.0f, -1.0f};
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 40);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = rng() % 3 == 0 ? specials[rng() % 7] : static_cast<float>(rng() % 9) - 4;
    float sequential = v[0];  // the reference's loop
    for (int64_t j = 1; j < n; ++j) {
      if (v[j] > sequential) sequential = v[j];
    }
    // Any grouping of partial maxima (here: a random number of strided partitions).
    const int parts = 1 + static_cast<int>(rng() % 8);
    float combined = canonical::MaxStart();
    for (int p = parts - 1; p >= 0; --p) {
      float partial = canonical::MaxStart();
      for (int64_t j = p; j < n; j += parts) partial = canonical::MaxStep(partial, v[j]);
      combined = canonical::MaxStep(combined, partial);
    }
    combined = canonical::MaxFinish(combined, v[0]);
    const float max = canonical::Max(v.data(), n);
    if (std::isnan(sequential)) {
      EXPECT_TRUE(std::isnan(combined) && std::isnan(max));
    } else if (sequential == 0.0f) {
      // Only the sign of a zero may depend on the grouping: Exp(s - (+0)) == Exp(s - (-0)).
      EXPECT_EQ(combined, 0.0f);
      EXPECT_EQ(Bits(max), Bits(sequential));  // in order: the same bits
    } else {
      EXPECT_EQ(Bits(combined), Bits(sequential));
      EXPECT_EQ(Bits(max), Bits(sequential));
    }
  }
}

TEST(KernelsCanonical, ExpEqualsTheKernelExpEverywhere) {
  for (uint64_t b = 0; b <= 0xffffffffull; b += 9973) {
    float x;
    const uint32_t bits = static_cast<uint32_t>(b);
    std::memcpy(&x, &bits, 4);
    ASSERT_EQ(Bits(canonical::Exp(x)), Bits(Exp(x))) << x;
  }
}

TEST(KernelsCanonical, F16ConversionIsTheKernelsForAll65536Values) {
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_EQ(Bits(canonical::F16ToF32(static_cast<uint16_t>(h))),
              Bits(F16ToF32(static_cast<uint16_t>(h))))
        << h;
  }
}

// A 4-wide arithmetic type built from the scalar one, the way a SIMD type plugs in: the
// templates must give each element exactly the scalar bits.
struct Quad {
  using V = std::array<float, 4>;
  using I = std::array<int32_t, 4>;
  using S = canonical::Scalar;
  template <class F>
  static V Map(F f, const V& a) {
    return {f(a[0]), f(a[1]), f(a[2]), f(a[3])};
  }
  template <class F>
  static V Map(F f, const V& a, const V& b) {
    return {f(a[0], b[0]), f(a[1], b[1]), f(a[2], b[2]), f(a[3], b[3])};
  }
  static V Set1(float c) { return {c, c, c, c}; }
  static V Fma(V a, V b, V c) {
    return {S::Fma(a[0], b[0], c[0]), S::Fma(a[1], b[1], c[1]), S::Fma(a[2], b[2], c[2]),
            S::Fma(a[3], b[3], c[3])};
  }
  static V Add(V a, V b) { return Map(S::Add, a, b); }
  static V Sub(V a, V b) { return Map(S::Sub, a, b); }
  static V Mul(V a, V b) { return Map(S::Mul, a, b); }
  static V Div(V a, V b) { return Map(S::Div, a, b); }
  static V Sqrt(V a) { return Map(S::Sqrt, a); }
  static V Neg(V a) { return Map(S::Neg, a); }
  static V MaxStep(V mx, V v) { return Map(S::MaxStep, mx, v); }
  static I ToInt(V a) { return {S::ToInt(a[0]), S::ToInt(a[1]), S::ToInt(a[2]), S::ToInt(a[3])}; }
  static I HalfFloor(I i) { return {i[0] >> 1, i[1] >> 1, i[2] >> 1, i[3] >> 1}; }
  static I SubInt(I a, I b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3]}; }
  static V Pow2(I e) { return {S::Pow2(e[0]), S::Pow2(e[1]), S::Pow2(e[2]), S::Pow2(e[3])}; }
  static V Exp(V x) { return Map(canonical::Exp, x); }
};

TEST(KernelsCanonical, TemplatesOverAVectorTypeGiveTheScalarBits) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> wide(-103.0f, 88.0f);
  for (int trial = 0; trial < 20000; ++trial) {
    Quad::V x, y, c, s;
    for (int i = 0; i < 4; ++i) {
      x[i] = wide(rng);
      y[i] = wide(rng) * 0.01f;
      c[i] = std::cos(y[i]);
      s[i] = std::sin(y[i]);
    }
    const Quad::V e = canonical::ExpCore<Quad>(x);
    const Quad::V silu = canonical::SiluMul<Quad>(x, y);
    const Quad::V gelu = canonical::GeluTanhMul<Quad>(x, y);
    Quad::V r1, r2;
    canonical::RopeRotate<Quad>(x, y, c, s, &r1, &r2);
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(Bits(e[i]), Bits(canonical::Exp(x[i]))) << x[i];
      ASSERT_EQ(Bits(silu[i]), Bits(canonical::SiluMul(x[i], y[i])));
      ASSERT_EQ(Bits(gelu[i]), Bits(canonical::GeluTanhMul(x[i], y[i])));
      float s1, s2;
      canonical::RopeRotate(x[i], y[i], c[i], s[i], &s1, &s2);
      ASSERT_EQ(Bits(r1[i]), Bits(s1));
      ASSERT_EQ(Bits(r2[i]), Bits(s2));
    }
  }
  // The fold over vectors is the fold of each element.
  Quad::V lanes[canonical::kLanes];
  float column[canonical::kLanes];
  for (int l = 0; l < canonical::kLanes; ++l) {
    lanes[l] = {wide(rng), wide(rng), wide(rng), wide(rng)};
    column[l] = lanes[l][2];
  }
  EXPECT_EQ(Bits(canonical::FoldLanes<Quad>(lanes)[2]), Bits(canonical::FoldLanes(column)));
}

}  // namespace
}  // namespace trace::kernels
