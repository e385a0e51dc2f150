// Every CPU path this machine has (the scalar reference, AVX2, AVX-512 or NEON, each forced by
// its Impl) gives the same bits for every op besides MatMul (kernels_test.cc holds MatMul's):
// CanonicalDot, RmsNorm, Embedding, RoPE, SiluMul, Add, ExpArray and canonical Attention,
// over odd lengths (not multiples of 4, 8, 16 or 32; past the AVX-512 16-block group and the
// 16-position group) and special values: subnormals, signed zeros, infinities and NaN (a NaN
// result must be NaN; which NaN is not in the contract: FirstBitDifference).
// docs/numerics.md section 10. On aarch64 tests/arm64/check.sh runs this file under qemu.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace trace::kernels {
namespace {

using testing::AttentionCase;
using testing::FirstBitDifference;
using testing::RandomVector;
using testing::RandomWeights;
using testing::RunAttention;
using testing::SimdPaths;

const DType kDTypes[] = {DType::kBF16, DType::kF16, DType::kF32};
const float kInf = std::numeric_limits<float>::infinity();
const float kSub = std::numeric_limits<float>::denorm_min();
const float kNan = canonical::BitsToFloat(0xffc00000u);

KernelContext Ctx(Impl impl, ThreadPool* pool = nullptr) {
  KernelContext ctx;
  ctx.impl = impl;
  ctx.pool = pool;
  return ctx;
}

// Random values with special ones sprinkled in: every 5th element one of subnormal (of
// several sizes and both signs), -0, +0, the smallest normal / 3, and, with `with_inf_nan`,
// +inf, -inf, NaN.
std::vector<float> WithSpecials(std::mt19937_64& rng, int64_t n, bool with_inf_nan,
                                float scale = 1.0f) {
  std::vector<float> v = RandomVector(rng, n, scale);
  const float specials[] = {kSub,  -kSub * 3, -0.0f, 0.0f, std::numeric_limits<float>::min() / 3,
                            -kSub, kInf,      -kInf, kNan};
  const int count = with_inf_nan ? 9 : 6;
  std::uniform_int_distribution<int> pick(0, count - 1);
  for (int64_t i = 0; i < n; i += 5) v[static_cast<size_t>(i)] = specials[pick(rng)];
  return v;
}

// The path names and what a request runs on this architecture: each path only where it is
// built (x86: AVX2 and AVX-512 if the CPU has them; aarch64: NEON), a request for a path the
// machine lacks runs the best one below it, and every name parses back to its path.
TEST(KernelsSimdPaths, PathsExistOnlyOnTheirArchitecture) {
  const std::vector<Impl> paths = AvailableCpuIsaPaths();
  const auto has = [&](Impl impl) {
    return std::find(paths.begin(), paths.end(), impl) != paths.end();
  };
  EXPECT_EQ(paths.back(), Impl::kReference);
#if defined(__aarch64__)
  EXPECT_TRUE(has(Impl::kNeon));
  EXPECT_STREQ(CpuIsaPathName(Impl::kNeon), "neon");
  EXPECT_STREQ(CpuIsaPathName(Impl::kAvx2), "reference");
  EXPECT_STREQ(CpuIsaPathName(Impl::kAvx512), "reference");
#else
  EXPECT_FALSE(has(Impl::kNeon));
  EXPECT_STREQ(CpuIsaPathName(Impl::kNeon), "reference");
  EXPECT_EQ(has(Impl::kAvx2), HaveAvx2());
  EXPECT_EQ(has(Impl::kAvx512), HaveAvx512());
#endif
  EXPECT_STREQ(CpuIsaPathName(Impl::kReference), "reference");
  for (Impl impl : paths) {
    Impl parsed = Impl::kAuto;
    ASSERT_TRUE(ParseCpuIsaPath(CpuIsaPathName(impl), &parsed)) << CpuIsaPathName(impl);
    EXPECT_EQ(parsed, impl) << CpuIsaPathName(impl);
  }
  Impl parsed = Impl::kAuto;
  EXPECT_TRUE(ParseCpuIsaPath("neon", &parsed));
  EXPECT_EQ(parsed, Impl::kNeon);
  EXPECT_FALSE(ParseCpuIsaPath("sve", &parsed));
}

TEST(KernelsSimdPaths, DotEqualsReference) {
  std::mt19937_64 rng(41);
  for (int64_t n : {0, 1, 7, 31, 32, 33, 255, 511, 512, 513, 1000, 1024, 1025, 1567, 4097, 33000}) {
    for (bool specials : {false, true}) {
      const auto a = specials ? WithSpecials(rng, n, false) : RandomVector(rng, n);
      const auto b = specials ? WithSpecials(rng, n, n % 2 == 1) : RandomVector(rng, n);
      const std::string where = "n = " + std::to_string(n) + (specials ? " specials" : "");
      const float dot = CanonicalDot(a.data(), b.data(), n);
      const float squares = CanonicalDot(a.data(), a.data(), n);
      for (const testing::NamedDot& simd : testing::SimdDots()) {
        EXPECT_EQ(testing::Bits(dot), testing::Bits(simd.dot(a.data(), b.data(), n)))
            << where << " " << simd.path;
        EXPECT_EQ(testing::Bits(squares), testing::Bits(simd.dot(a.data(), a.data(), n)))
            << where << " " << simd.path;
      }
    }
  }
}

TEST(KernelsSimdPaths, RmsNormEqualsReference) {
  std::mt19937_64 rng(42);
  auto pool = ThreadPool::Create(2);
  for (DType dtype : kDTypes) {
    for (int64_t n : {1, 15, 17, 31, 33, 100, 513, 896, 1025, 4097}) {
      const int64_t M = 5;
      // Row 0 subnormals and zeros only (sum of squares underflows to 0), row 1 all -0,
      // row 2 one +inf (inf * 0 = NaN), row 3 random with specials, row 4 random.
      auto x = RandomVector(rng, M * n, 2.0f);
      const auto specials = WithSpecials(rng, n, false);
      for (int64_t i = 0; i < n; ++i) {
        x[i] = (i % 3 == 0 ? -kSub : kSub) * static_cast<float>(i % 5);
        x[n + i] = -0.0f;
        x[3 * n + i] = specials[i];
      }
      x[2 * n + n / 2] = kInf;
      auto w = RandomWeights(rng, dtype, 1, n, 1.0f);
      const auto ref = [&] {
        std::vector<float> out(x.size());
        RmsNorm(Ctx(Impl::kReference), x.data(), M, n, w.view(), 1e-6f, out.data());
        return out;
      }();
      for (Impl impl : SimdPaths()) {
        const std::string where =
            std::string(DTypeName(dtype)) + " n=" + std::to_string(n) + " " + CpuIsaPathName(impl);
        std::vector<float> out(x.size());
        RmsNorm(Ctx(impl, pool.get()), x.data(), M, n, w.view(), 1e-6f, out.data());
        ASSERT_EQ(FirstBitDifference(ref.data(), out.data(), ref.size()), "") << where;
        auto in_place = x;  // x and out may alias
        RmsNorm(Ctx(impl), in_place.data(), M, n, w.view(), 1e-6f, in_place.data());
        ASSERT_EQ(FirstBitDifference(ref.data(), in_place.data(), ref.size()), "") << where;
      }
    }
  }
}

TEST(KernelsSimdPaths, EmbeddingEqualsReference) {
  std::mt19937_64 rng(43);
  for (DType dtype : kDTypes) {
    for (int64_t dim : {1, 15, 17, 31, 33, 1000}) {
      auto table = RandomWeights(rng, dtype, 20, dim, 1.0f);
      // Row 7: stored special values (zeros of both signs, infinities, the smallest
      // subnormal of the dtype), bit patterns written directly.
      for (int64_t i = 0; i < dim; ++i) {
        const size_t at = static_cast<size_t>(7 * dim + i);
        if (dtype == DType::kF32) {
          const float vals[4] = {-0.0f, kInf, -kSub, 0.0f};
          std::memcpy(table.bytes.data() + 4 * at, &vals[i % 4], 4);
        } else {
          const uint16_t vals[4] = {0x8000u,
                                    dtype == DType::kF16 ? uint16_t{0xfc00u} : uint16_t{0xff80u},
                                    0x0001u, 0x8001u};
          std::memcpy(table.bytes.data() + 2 * at, &vals[i % 4], 2);
        }
      }
      const std::vector<int32_t> ids = {7, 0, 19, 7, 3};
      std::vector<float> ref(ids.size() * dim);
      Embedding(Ctx(Impl::kReference), table.view(), ids.data(), 5, ref.data());
      for (Impl impl : SimdPaths()) {
        std::vector<float> got(ref.size());
        Embedding(Ctx(impl), table.view(), ids.data(), 5, got.data());
        ASSERT_EQ(FirstBitDifference(ref.data(), got.data(), ref.size()), "")
            << DTypeName(dtype) << " dim " << dim << " " << CpuIsaPathName(impl);
      }
    }
  }
}

TEST(KernelsSimdPaths, RopeEqualsReference) {
  std::mt19937_64 rng(44);
  for (int64_t head_dim : {2, 6, 14, 30, 34, 64, 66, 128, 130}) {
    const int64_t M = 4, heads = 3, max_pos = 100;
    std::vector<float> cos_t(max_pos * head_dim / 2), sin_t(cos_t.size());
    MakeRopeTables(max_pos, head_dim, 10000.0, cos_t.data(), sin_t.data());
    const std::vector<int32_t> positions = {0, 1, 57, 99};
    const auto x = WithSpecials(rng, M * heads * head_dim, true);
    auto ref = x;
    Rope(Ctx(Impl::kReference), ref.data(), M, heads, head_dim, positions.data(), cos_t.data(),
         sin_t.data());
    for (Impl impl : SimdPaths()) {
      auto got = x;
      Rope(Ctx(impl), got.data(), M, heads, head_dim, positions.data(), cos_t.data(), sin_t.data());
      ASSERT_EQ(FirstBitDifference(ref.data(), got.data(), ref.size()), "")
          << "head_dim " << head_dim << " " << CpuIsaPathName(impl);
    }
  }
}

// SiluMul and GeluTanhMul (the gated activations of SwiGLU and GeGLU).
TEST(KernelsSimdPaths, GatedActivationsEqualReference) {
  using Gated = void (*)(const KernelContext&, const float*, const float*, int64_t, float*);
  const std::pair<const char*, Gated> ops[] = {{"SiluMul", SiluMul}, {"GeluTanhMul", GeluTanhMul}};
  std::mt19937_64 rng(45);
  auto pool = ThreadPool::Create(2);
  for (const auto& [name, op] : ops) {
    for (int64_t n : {1, 15, 17, 31, 33, 4097, 10001}) {
      auto gate = WithSpecials(rng, n, true, 8.0f);
      gate[0] = -120.0f;  // Exp(120) = inf: the activation -> -0
      if (n > 3) gate[3] = 100.0f;
      const auto up = WithSpecials(rng, n, true);
      std::vector<float> ref(n);
      op(Ctx(Impl::kReference), gate.data(), up.data(), n, ref.data());
      for (Impl impl : SimdPaths()) {
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool.get()}) {
          std::vector<float> got(n);
          op(Ctx(impl, p), gate.data(), up.data(), n, got.data());
          ASSERT_EQ(FirstBitDifference(ref.data(), got.data(), n), "")
              << name << " n " << n << " " << CpuIsaPathName(impl);
        }
      }
    }
  }
}

TEST(KernelsSimdPaths, AddEqualsReference) {
  std::mt19937_64 rng(46);
  for (int64_t n : {1, 9, 15, 17, 33, 1025}) {
    const auto a = WithSpecials(rng, n, true), b = WithSpecials(rng, n, true);
    std::vector<float> ref(n);
    Add(Ctx(Impl::kReference), a.data(), b.data(), n, ref.data());
    for (Impl impl : SimdPaths()) {
      std::vector<float> got(n);
      Add(Ctx(impl), a.data(), b.data(), n, got.data());
      ASSERT_EQ(FirstBitDifference(ref.data(), got.data(), n), "")
          << "n " << n << " " << CpuIsaPathName(impl);
    }
  }
}

TEST(KernelsSimdPaths, AttentionEqualsReference) {
  std::mt19937_64 rng(47);
  auto pool = ThreadPool::Create(2);
  // head_dim 16 .. 256 run the AVX-512 kernel (48 and 80: chunk counts kept in memory), 40
  // the AVX2 one on every SIMD path, 12 the reference; positions around the 16-position
  // group and the 32-position block, and past 1024 (a lane visited twice).
  const AttentionCase cases[] = {{2, 1, 64, 0},   {2, 1, 16, 14},   {14, 2, 64, 15},
                                 {4, 4, 128, 16}, {8, 2, 128, 33},  {3, 1, 48, 47},
                                 {2, 2, 80, 31},  {2, 1, 256, 20},  {2, 1, 40, 17},
                                 {2, 1, 12, 9},   {4, 2, 64, 1100}, {2, 1, 128, 1056}};
  for (const auto& c : cases) {
    const int64_t rows = c.pos + 1;
    for (int variant = 0; variant < 3; ++variant) {
      // 0: random; 1: subnormals and signed zeros in q, k and v, infinities in v; 2: an
      // infinite key element (an infinite or NaN score, so NaN probabilities).
      auto q = RandomVector(rng, c.n_heads * c.head_dim);
      auto k = RandomVector(rng, rows * c.n_kv_heads * c.head_dim);
      auto v = RandomVector(rng, rows * c.n_kv_heads * c.head_dim);
      if (variant == 1) {
        q = WithSpecials(rng, c.n_heads * c.head_dim, false);
        k = WithSpecials(rng, rows * c.n_kv_heads * c.head_dim, false);
        v = WithSpecials(rng, rows * c.n_kv_heads * c.head_dim, true);
      } else if (variant == 2) {
        k[static_cast<size_t>(rows / 2 * c.n_kv_heads * c.head_dim + 1)] = kInf;
      }
      const auto ref = RunAttention(Ctx(Impl::kReference), q, k, v, c);
      for (Impl impl : SimdPaths()) {
        const std::string where =
            "heads " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv_heads) + " d " +
            std::to_string(c.head_dim) + " pos " + std::to_string(c.pos) + " variant " +
            std::to_string(variant) + " " + CpuIsaPathName(impl);
        const auto got = RunAttention(Ctx(impl), q, k, v, c);
        ASSERT_EQ(FirstBitDifference(ref.data(), got.data(), ref.size()), "") << where;
        const auto got2 = RunAttention(Ctx(impl, pool.get()), q, k, v, c);
        ASSERT_EQ(FirstBitDifference(ref.data(), got2.data(), ref.size()), "") << where;
      }
    }
  }
}

TEST(KernelsSimdPaths, ExpArrayEqualsScalar) {
  std::mt19937_64 rng(48);
  std::vector<float> xs = WithSpecials(rng, 1000, true, 40.0f);
  for (float s : {-kInf, kInf, kNan, -200.0f, 100.0f, 88.72283172607421875f, 88.7228393554687f,
                  -104.0f, -103.97f, 0.0f, -0.0f, 1e-30f, -1e-30f}) {
    xs.push_back(s);
  }
  xs.push_back(0.5f);  // 1014 elements: a tail on every vector width
  for (Impl impl : SimdPaths()) {
    std::vector<float> got(xs.size());
    ExpArray(Ctx(impl), xs.data(), static_cast<int64_t>(xs.size()), got.data());
    for (size_t i = 0; i < xs.size(); ++i) {
      ASSERT_EQ(testing::Bits(Exp(xs[i])), testing::Bits(got[i]))
          << "x = " << xs[i] << " " << CpuIsaPathName(impl);
    }
  }
}

}  // namespace
}  // namespace trace::kernels
