// Kernel tests (docs/numerics.md, "What is tested where"): the AVX2 path equals the scalar
// reference bit for bit in canonical mode; canonical results are independent of M and the
// thread count; canonical and fast results are within stated tolerances of float64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "tests/kernels/test_util.h"

namespace trace::kernels {
namespace {

using testing::AttentionCase;
using testing::Bits;
using testing::Ctx;
using testing::FirstBitDifference;
using testing::NamedDot;
using testing::RandomVector;
using testing::RandomWeights;
using testing::RunAttention;
using testing::RunMatMul;
using testing::SimdDots;
using testing::SimdPaths;

constexpr double kUnitRoundoff = 0x1p-24;
const DType kDTypes[] = {DType::kBF16, DType::kF16, DType::kF32};

// Error bound of the canonical dot of length n, relative to sum |a_k b_k|: the longest
// lane chain has ceil(n / 1024) * 32 fmas, then 31 adds fold the lanes.
double CanonicalDotBound(int64_t n) {
  const double chain = static_cast<double>((n + 1023) / 1024 * 32);
  return (chain + 31.0) * kUnitRoundoff * 1.01;
}

TEST(KernelsConvert, F16AllValuesExactAndRoundTrip) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exponent == 0x1f) {
      EXPECT_TRUE(mantissa ? std::isnan(f) : std::isinf(f)) << h;
      continue;
    }
    const double expect = exponent == 0 ? sign * std::ldexp(mantissa, -24)
                                        : sign * std::ldexp(1024 + mantissa, exponent - 25);
    ASSERT_EQ(static_cast<double>(f), expect) << h;
    ASSERT_EQ(F32ToF16RoundNearestEven(f), h) << h;
  }
}

TEST(KernelsConvert, RoundNearestEven) {
  // 1 + 2^-11 is halfway between two f16 values: ties to even (1.0).
  EXPECT_EQ(F32ToF16RoundNearestEven(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(F32ToF16RoundNearestEven(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  EXPECT_EQ(F32ToF16RoundNearestEven(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(F32ToF16RoundNearestEven(65519.0f), 0x7bff);
  EXPECT_EQ(F32ToBf16RoundNearestEven(1.0f + 0x1p-8f), 0x3f80);  // tie to even
  EXPECT_EQ(F32ToBf16RoundNearestEven(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(Bf16ToF32(0x3f81), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16RoundNearestEven(NAN))));
}

TEST(KernelsDot, CanonicalAgainstFloat64) {
  std::mt19937_64 rng(1);
  for (int64_t n : {0, 1, 31, 32, 33, 1000, 1024, 1025, 4097, 40000}) {
    const auto a = RandomVector(rng, n), b = RandomVector(rng, n);
    double exact = 0, magnitude = 0, exact_sum = 0, sum_magnitude = 0;
    for (int64_t k = 0; k < n; ++k) {
      exact += static_cast<double>(a[k]) * b[k];
      magnitude += std::fabs(static_cast<double>(a[k]) * b[k]);
      exact_sum += a[k];
      sum_magnitude += std::fabs(a[k]);
    }
    EXPECT_LE(std::fabs(CanonicalDot(a.data(), b.data(), n) - exact),
              CanonicalDotBound(n) * magnitude + 1e-30)
        << "n = " << n;
    EXPECT_LE(std::fabs(CanonicalSum(a.data(), n) - exact_sum),
              CanonicalDotBound(n) * sum_magnitude + 1e-30)
        << "n = " << n;
  }
}

TEST(KernelsDot, OrderIsTheContracts) {
  // Lane 0 holds 1e8 (block 0), lane 1 holds 1 (block 1), lane 2 holds -1e8 (block 2):
  // the left fold gives (1e8 + 1) - 1e8 = 0 in f32; a plain sequential sum gives the same
  // but a pairwise fold of lanes would give 1. Block 32 returns to lane 0.
  std::vector<float> a(33 * 32, 0.0f), ones(a.size(), 1.0f);
  a[0] = 1e8f;
  a[32] = 1.0f;
  a[64] = -1e8f;
  EXPECT_EQ(CanonicalSum(a.data(), static_cast<int64_t>(a.size())), 0.0f);
  EXPECT_EQ(CanonicalDot(a.data(), ones.data(), static_cast<int64_t>(a.size())), 0.0f);
  a[32 * 32] = 1.0f;  // block 32: lane 0 becomes 1e8 + 1 = 1e8 (absorbed)
  EXPECT_EQ(CanonicalSum(a.data(), static_cast<int64_t>(a.size())), 0.0f);
  a[0] = 1.0f;  // lane 0: 1 + 1 = 2, lane 1: 1, lane 2: -1e8 -> (2 + 1) - 1e8
  EXPECT_EQ(CanonicalSum(a.data(), static_cast<int64_t>(a.size())), 3.0f - 1e8f);
}

TEST(KernelsDot, SimdEqualsReferenceBitwise) {
  if (SimdDots().empty()) GTEST_SKIP() << "no SIMD path on this CPU";
  std::mt19937_64 rng(2);
  for (int64_t n : {1, 7, 31, 33, 255, 256, 257, 896, 1000, 1025, 4097, 8192, 33000}) {
    const auto a = RandomVector(rng, n), b = RandomVector(rng, n);
    for (const NamedDot& simd : SimdDots()) {
      ASSERT_EQ(Bits(CanonicalDot(a.data(), b.data(), n)), Bits(simd.dot(a.data(), b.data(), n)))
          << "n = " << n << " " << simd.path;
    }
  }
}

struct MatMulCase {
  int64_t M, N, K;
};

TEST(KernelsMatMul, Avx2EqualsReferenceBitwise) {
  std::mt19937_64 rng(3);
  auto pool = ThreadPool::Create(2);
  // N past a 32-column panel and not a multiple of 8; M past the AVX-512 micro-tile (8
  // rows) and, with K = 16385, past its row block (56 rows: 4 MiB of x) so each panel is
  // packed twice, the second block with a short micro-tile.
  const MatMulCase cases[] = {{1, 1, 1},     {1, 8, 31},     {3, 13, 33},   {7, 33, 1000},
                              {13, 9, 1025}, {1, 16, 4097},  {20, 24, 64},  {6, 8, 896},
                              {1, 70, 1000}, {1, 96, 65},    {8, 70, 100},  {9, 41, 67},
                              {1, 161, 129}, {61, 37, 4097}, {70, 9, 16385}};
  for (DType dtype : kDTypes) {
    for (const auto& c : cases) {
      const auto w = RandomWeights(rng, dtype, c.N, c.K);
      const auto x = RandomVector(rng, c.M * c.K);
      const auto bias = RandomVector(rng, c.N);
      for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
        const auto ref = RunMatMul(Ctx(Impl::kReference), x, c.M, w.view(), b);
        const std::string where = std::string(DTypeName(dtype)) + " M=" + std::to_string(c.M) +
                                  " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K);
        // The interleaved layout gives the same bits, on every path.
        std::vector<uint8_t> packed(InterleavedWeightsBytes(w.view()));
        const WeightView iv = InterleaveWeights(w.view(), packed.data());
        const auto iref = RunMatMul(Ctx(Impl::kReference), x, c.M, iv, b);
        ASSERT_EQ(FirstBitDifference(ref.data(), iref.data(), ref.size()), "") << where;
        for (Impl impl : SimdPaths()) {
          const std::string path = where + " " + CpuIsaPathName(impl);
          const auto simd = RunMatMul(Ctx(impl), x, c.M, w.view(), b);
          const auto simd2 =
              RunMatMul(Ctx(impl, Numerics::kCanonical, pool.get()), x, c.M, w.view(), b);
          ASSERT_EQ(FirstBitDifference(ref.data(), simd.data(), ref.size()), "") << path;
          ASSERT_EQ(FirstBitDifference(ref.data(), simd2.data(), ref.size()), "") << path;
          const auto isimd = RunMatMul(Ctx(impl), x, c.M, iv, b);
          const auto isimd2 = RunMatMul(Ctx(impl, Numerics::kCanonical, pool.get()), x, c.M, iv, b);
          ASSERT_EQ(FirstBitDifference(ref.data(), isimd.data(), ref.size()), "") << path;
          ASSERT_EQ(FirstBitDifference(ref.data(), isimd2.data(), ref.size()), "") << path;
        }
        // Canonical against float64, per element, within the stated dot bound.
        for (int64_t m = 0; m < c.M; ++m) {
          for (int64_t n = 0; n < c.N; ++n) {
            double exact = 0, mag = 0;
            for (int64_t k = 0; k < c.K; ++k) {
              const double p = static_cast<double>(x[m * c.K + k]) * w.values[n * c.K + k];
              exact += p;
              mag += std::fabs(p);
            }
            const double got = ref[m * c.N + n] - (b ? b[n] : 0.0f);
            ASSERT_LE(std::fabs(got - exact), CanonicalDotBound(c.K) * mag +
                                                  4 * kUnitRoundoff * std::fabs(ref[m * c.N + n]) +
                                                  1e-30)
                << where;
          }
        }
      }
    }
  }
}

// Special values through every path: subnormal activations and weights (f32 and f16
// subnormals; bf16 keeps f32's exponent range), signed zeros, infinities of both signs and
// NaN in x (the default NaN's bits, so that no payload choice is involved: NaN weights are
// outside the contract, docs/numerics.md section 2). Rows: 0 subnormal x, 1 all -0, 2 one
// +inf, 3 +inf and -inf (NaN), 4 a NaN, 5 products that underflow, then random rows.
TEST(KernelsMatMul, SpecialValuesEqualOnEveryPath) {
  std::mt19937_64 rng(31);
  auto pool = ThreadPool::Create(2);
  const float kSub = std::numeric_limits<float>::denorm_min();
  const float kNan = canonical::BitsToFloat(0xffc00000u);
  for (DType dtype : kDTypes) {
    for (int64_t K : {37, 1000, 1100}) {
      const int64_t N = 45, M = 11;
      auto w = RandomWeights(rng, dtype, N, K);
      // Column 3: zeros of both signs; column 4 tiny (subnormal in f16 and f32, 2^-120 in
      // bf16), column 5 huge.
      for (int64_t k = 0; k < K; ++k) {
        const float tiny = dtype == DType::kBF16  ? 0x1p-120f
                           : dtype == DType::kF16 ? 0x1p-20f
                                                  : 0x1p-140f;
        const float vals[3] = {k % 2 ? -0.0f : 0.0f, (k % 3 ? tiny : -tiny), 0x1p+15f};
        for (int c = 0; c < 3; ++c) {
          const int64_t i = (3 + c) * K + k;
          w.values[i] = vals[c];
          if (dtype == DType::kF32) {
            std::memcpy(w.bytes.data() + 4 * i, &vals[c], 4);
          } else {
            const uint16_t h = dtype == DType::kBF16 ? F32ToBf16RoundNearestEven(vals[c])
                                                     : F32ToF16RoundNearestEven(vals[c]);
            std::memcpy(w.bytes.data() + 2 * i, &h, 2);
          }
        }
      }
      auto x = RandomVector(rng, M * K);
      for (int64_t k = 0; k < K; ++k) {
        x[0 * K + k] = (k % 2 ? kSub : -kSub) * static_cast<float>(k % 7 + 1);
        x[1 * K + k] = -0.0f;
        x[5 * K + k] = (k % 2 ? 1.0f : -1.0f) * 0x1p-100f;
      }
      x[2 * K + K / 2] = std::numeric_limits<float>::infinity();
      x[3 * K + 1] = std::numeric_limits<float>::infinity();
      x[3 * K + K - 1] = -std::numeric_limits<float>::infinity();
      x[4 * K + K - 2] = kNan;
      std::vector<uint8_t> packed(InterleavedWeightsBytes(w.view()));
      const WeightView iv = InterleaveWeights(w.view(), packed.data());
      const auto bias = RandomVector(rng, N);
      for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
        const auto ref = RunMatMul(Ctx(Impl::kReference), x, M, w.view(), b);
        // The inputs do reach the special cases: inf, NaN, subnormal and zero results (never
        // -0: every lane chain starts at +0).
        int infs = 0, nans = 0, subnormals = 0, zeros = 0;
        for (float v : ref) {
          infs += std::isinf(v);
          nans += std::isnan(v);
          subnormals += std::fpclassify(v) == FP_SUBNORMAL;
          zeros += v == 0.0f;
        }
        ASSERT_GT(infs, 0);
        ASSERT_GT(nans, 0);
        if (b == nullptr) {
          ASSERT_GT(subnormals, 0) << DTypeName(dtype);
          ASSERT_GT(zeros, 0) << DTypeName(dtype);
        }
        for (Impl impl : SimdPaths()) {
          const std::string where = std::string(DTypeName(dtype)) + " K=" + std::to_string(K) +
                                    " " + CpuIsaPathName(impl);
          for (const WeightView& view : {w.view(), iv}) {
            for (int64_t rows : {int64_t{1}, M}) {
              // M = 1 takes the decode kernels, M = 11 the packed micro-tiles.
              const auto got =
                  RunMatMul(Ctx(impl, Numerics::kCanonical, pool.get()), x, rows, view, b);
              ASSERT_EQ(FirstBitDifference(ref.data(), got.data(), got.size()), "")
                  << where << " rows " << rows
                  << (view.layout == WeightLayout::kRowMajor ? " row-major" : " interleaved");
            }
          }
        }
      }
    }
  }
}

TEST(KernelsMatMul, InterleaveWeightsLayout) {
  std::mt19937_64 rng(13);
  for (DType dtype : kDTypes) {
    const auto w = RandomWeights(rng, dtype, 45, 5);
    std::vector<uint8_t> packed(InterleavedWeightsBytes(w.view()));
    ASSERT_EQ(packed.size(), 64u * 5 * DTypeSize(dtype));
    const WeightView iv = InterleaveWeights(w.view(), packed.data());
    EXPECT_EQ(iv.layout, WeightLayout::kInterleaved32);
    for (int64_t n = 0; n < 45; ++n) {
      for (int64_t k = 0; k < 5; ++k) {
        ASSERT_EQ(WeightAt(iv, n, k), w.values[n * 5 + k]);
        // ((n / 32) * cols + k) * 32 + n % 32
        const size_t at = static_cast<size_t>(((n / 32) * 5 + k) * 32 + n % 32) * DTypeSize(dtype);
        ASSERT_EQ(std::memcmp(packed.data() + at, w.bytes.data() + (n * 5 + k) * DTypeSize(dtype),
                              DTypeSize(dtype)),
                  0);
      }
    }
  }
}

TEST(KernelsMatMul, RowResultIndependentOfBatchAndThreads) {
  std::mt19937_64 rng(4);
  auto pool = ThreadPool::Create(2);
  for (DType dtype : kDTypes) {
    for (int64_t K : {33, 896, 4097}) {
      const int64_t N = 37;
      const auto w = RandomWeights(rng, dtype, N, K);
      std::vector<uint8_t> packed(InterleavedWeightsBytes(w.view()));
      const WeightView iv = InterleaveWeights(w.view(), packed.data());
      const auto row = RandomVector(rng, K);
      const auto alone = RunMatMul(Ctx(Impl::kAuto), row, 1, w.view(), nullptr);
      for (int64_t M = 2; M <= 33; M += (K > 1000 ? 7 : 1)) {
        auto x = RandomVector(rng, M * K);
        const int64_t at = static_cast<int64_t>(rng() % static_cast<uint64_t>(M));
        std::copy(row.begin(), row.end(), x.begin() + at * K);
        for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool.get()}) {
          const auto batched =
              RunMatMul(Ctx(Impl::kAuto, Numerics::kCanonical, p), x, M, w.view(), nullptr);
          ASSERT_EQ(FirstBitDifference(alone.data(), batched.data() + at * N, N), "")
              << DTypeName(dtype) << " K=" << K << " M=" << M << " row " << at
              << (p ? " 2 threads" : " 1 thread");
          const auto interleaved =
              RunMatMul(Ctx(Impl::kAuto, Numerics::kCanonical, p), x, M, iv, nullptr);
          ASSERT_EQ(FirstBitDifference(alone.data(), interleaved.data() + at * N, N), "")
              << "interleaved " << DTypeName(dtype) << " K=" << K << " M=" << M;
        }
      }
    }
  }
}

// The pool hands out chunks dynamically (kernels/thread_pool.h): how many threads, which
// chunk sizes and which thread took which chunk must not change a bit of any output, on every
// path, for shapes whose columns do not fill the last chunk.
TEST(KernelsMatMul, PoolSizeDoesNotChangeAnyBit) {
  std::mt19937_64 rng(6);
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int threads : {2, 3, 7}) pools.push_back(ThreadPool::Create(threads));
  const MatMulCase cases[] = {{1, 161, 129}, {1, 1000, 65}, {13, 1001, 67}, {61, 37, 4097}};
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (const auto& c : cases) {
      const auto w = RandomWeights(rng, dtype, c.N, c.K);
      std::vector<uint8_t> packed(InterleavedWeightsBytes(w.view()));
      const WeightView iv = InterleaveWeights(w.view(), packed.data());
      const auto x = RandomVector(rng, c.M * c.K);
      std::vector<Impl> paths = SimdPaths();
      paths.push_back(Impl::kReference);
      for (Impl impl : paths) {
        for (Numerics numerics : {Numerics::kCanonical, Numerics::kFast}) {
          for (const WeightView& view : {w.view(), iv}) {
            const auto alone = RunMatMul(Ctx(impl, numerics), x, c.M, view, nullptr);
            for (const auto& pool : pools) {
              const auto split = RunMatMul(Ctx(impl, numerics, pool.get()), x, c.M, view, nullptr);
              ASSERT_EQ(FirstBitDifference(alone.data(), split.data(), alone.size()), "")
                  << DTypeName(dtype) << " M=" << c.M << " N=" << c.N << " K=" << c.K << " "
                  << CpuIsaPathName(impl) << " " << NumericsName(numerics)
                  << (view.layout == WeightLayout::kInterleaved32 ? " interleaved" : "") << " "
                  << pool->num_threads() << " threads";
            }
          }
        }
      }
    }
  }
}

TEST(KernelsMatMul, FastModeWithinToleranceOfFloat64) {
  std::mt19937_64 rng(5);
  for (Impl impl : {Impl::kReference, Impl::kAuto}) {
    for (const auto& c : {MatMulCase{5, 11, 1000}, MatMulCase{1, 9, 33}, MatMulCase{9, 8, 4097}}) {
      const auto w = RandomWeights(rng, DType::kBF16, c.N, c.K);
      std::vector<uint8_t> packed(InterleavedWeightsBytes(w.view()));
      const WeightView iv = InterleaveWeights(w.view(), packed.data());
      const auto x = RandomVector(rng, c.M * c.K);
      for (const WeightView& view : {w.view(), iv}) {
        const auto y = RunMatMul(Ctx(impl, Numerics::kFast), x, c.M, view, nullptr);
        for (int64_t m = 0; m < c.M; ++m) {
          for (int64_t n = 0; n < c.N; ++n) {
            double exact = 0, mag = 0;
            for (int64_t k = 0; k < c.K; ++k) {
              const double p = static_cast<double>(x[m * c.K + k]) * w.values[n * c.K + k];
              exact += p;
              mag += std::fabs(p);
            }
            // Fast: chains of up to K/4 fmas (k mod 4 partial sums on interleaved weights, K/8
            // on row-major): bound (K/4 + 8) u sum|p|.
            ASSERT_LE(std::fabs(y[m * c.N + n] - exact),
                      (c.K / 4.0 + 8.0) * kUnitRoundoff * 1.01 * mag + 1e-30);
          }
        }
      }
    }
  }
}

TEST(KernelsRmsNorm, Avx2EqualsReferenceAndFloat64) {
  std::mt19937_64 rng(6);
  for (DType dtype : kDTypes) {
    for (int64_t n : {1, 31, 33, 896, 1025, 4097}) {
      const int64_t M = 3;
      const auto x = RandomVector(rng, M * n, 2.0f);
      const auto w = RandomWeights(rng, dtype, 1, n, 1.0f);
      std::vector<float> ref(x.size()), simd(x.size());
      RmsNorm(Ctx(Impl::kReference), x.data(), M, n, w.view(), 1e-6f, ref.data());
      RmsNorm(Ctx(Impl::kAuto), x.data(), M, n, w.view(), 1e-6f, simd.data());
      ASSERT_EQ(FirstBitDifference(ref.data(), simd.data(), ref.size()), "")
          << DTypeName(dtype) << " n=" << n;
      for (int64_t m = 0; m < M; ++m) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[m * n + i]) * x[m * n + i];
        const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
        for (int64_t i = 0; i < n; ++i) {
          const double exact = x[m * n + i] * inv * w.values[i];
          ASSERT_NEAR(ref[m * n + i], exact, 1e-5 * std::fabs(exact) + 1e-30);
        }
      }
    }
  }
}

TEST(KernelsEmbedding, Avx2EqualsReferenceAndExact) {
  std::mt19937_64 rng(7);
  for (DType dtype : kDTypes) {
    for (int64_t dim : {1, 31, 64, 1000}) {
      const auto table = RandomWeights(rng, dtype, 50, dim, 1.0f);
      const std::vector<int32_t> ids = {3, 0, 49, 3, 17};
      std::vector<float> ref(ids.size() * dim), simd(ids.size() * dim);
      Embedding(Ctx(Impl::kReference), table.view(), ids.data(), 5, ref.data());
      Embedding(Ctx(Impl::kAuto), table.view(), ids.data(), 5, simd.data());
      ASSERT_EQ(FirstBitDifference(ref.data(), simd.data(), ref.size()), "");
      std::vector<uint8_t> packed(InterleavedWeightsBytes(table.view()));
      const WeightView iv = InterleaveWeights(table.view(), packed.data());
      std::vector<float> inter(ids.size() * dim);
      Embedding(Ctx(Impl::kAuto), iv, ids.data(), 5, inter.data());
      ASSERT_EQ(FirstBitDifference(ref.data(), inter.data(), ref.size()), "");
      for (size_t m = 0; m < ids.size(); ++m) {
        ASSERT_EQ(FirstBitDifference(ref.data() + m * dim, table.values.data() + ids[m] * dim, dim),
                  "");
      }
    }
  }
}

TEST(KernelsRope, TablesAgainstLongDouble) {
  const int64_t max_pos = 4096, head_dim = 128;
  const double theta = 1000000.0;
  std::vector<float> cos_t(max_pos * head_dim / 2), sin_t(cos_t.size());
  MakeRopeTables(max_pos, head_dim, theta, cos_t.data(), sin_t.data());
  for (int64_t p = 0; p < max_pos; p += 7) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const long double angle =
          static_cast<long double>(p) /
          std::pow(static_cast<long double>(theta), static_cast<long double>(2 * i) / head_dim);
      const float c = cos_t[p * head_dim / 2 + i], s = sin_t[p * head_dim / 2 + i];
      // Rounded from double: within one float ulp of the long double value.
      ASSERT_LE(std::fabs(c - std::cos(angle)), std::ldexp(1.0, -23)) << p << " " << i;
      ASSERT_LE(std::fabs(s - std::sin(angle)), std::ldexp(1.0, -23)) << p << " " << i;
    }
  }
}

// Llama 3.1's frequency scaling (rope_type "llama3", as transformers'
// _compute_llama3_parameters defines it), recomputed here in long double from that
// definition: each frequency kept, divided by the factor, or blended, by its wavelength;
// the tables within one float ulp of the long double rotation. Llama 3.2 1B's numbers.
// A GGUF file's rope_freqs (RopeScaling::kFreqFactors) and linear scaling divide each base
// frequency, in double, by its factor.
TEST(KernelsRope, FreqFactorsAndLinearScalingDivideTheFrequency) {
  RopeScaling factors;
  factors.type = RopeScaling::Type::kFreqFactors;
  factors.freq_factors = {1.0f, 2.5f, 32.0f, 7.75f};
  RopeScaling linear;
  linear.type = RopeScaling::Type::kLinear;
  linear.factor = 8.0;
  for (int64_t i = 0; i < 4; ++i) {
    const double f = 1.0 / std::pow(500000.0, static_cast<double>(2 * i) / 8.0);
    EXPECT_EQ(RopeFrequency(i, 8, 500000.0, factors), f / factors.freq_factors[i]) << i;
    EXPECT_EQ(RopeFrequency(i, 8, 500000.0, linear), f / 8.0) << i;
    EXPECT_EQ(RopeFrequency(i, 8, 500000.0, {}), f) << i;
  }
}

TEST(KernelsRope, Llama3ScalingAgainstLongDouble) {
  const int64_t max_pos = 20000, head_dim = 64;
  const double theta = 500000.0;
  RopeScaling scaling;
  scaling.type = RopeScaling::Type::kLlama3;
  scaling.factor = 32.0;
  scaling.low_freq_factor = 1.0;
  scaling.high_freq_factor = 4.0;
  scaling.original_max_position_embeddings = 8192.0;
  const long double pi = 3.141592653589793238462643383279502884L;
  int kept = 0, divided = 0, blended = 0;
  std::vector<long double> want(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const long double f = 1.0L / std::pow(static_cast<long double>(theta),
                                          static_cast<long double>(2 * i) / head_dim);
    const long double wavelen = 2 * pi / f;
    const long double low_wavelen = 8192.0L / 1.0L, high_wavelen = 8192.0L / 4.0L;
    if (wavelen < high_wavelen) {
      want[i] = f;
      ++kept;
    } else if (wavelen > low_wavelen) {
      want[i] = f / 32.0L;
      ++divided;
    } else {
      const long double smooth = (8192.0L / wavelen - 1.0L) / (4.0L - 1.0L);
      want[i] = (1 - smooth) * f / 32.0L + smooth * f;
      ++blended;
    }
    const double got = RopeFrequency(i, head_dim, theta, scaling);
    ASSERT_LE(std::fabs(static_cast<long double>(got) - want[i]), want[i] * 1e-14L) << i;
    // Without scaling: the plain frequency.
    ASSERT_LE(std::fabs(static_cast<long double>(RopeFrequency(i, head_dim, theta, {})) - f),
              f * 1e-14L)
        << i;
  }
  EXPECT_GT(kept, 0);  // all three bands occur at these numbers
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  std::vector<float> cos_t(max_pos * head_dim / 2), sin_t(cos_t.size());
  MakeRopeTables(max_pos, head_dim, theta, cos_t.data(), sin_t.data(), scaling);
  for (int64_t p = 0; p < max_pos; p += 13) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      const long double angle = static_cast<long double>(p) * want[i];
      ASSERT_LE(std::fabs(cos_t[p * head_dim / 2 + i] - std::cos(angle)), std::ldexp(1.0, -23))
          << p << " " << i;
      ASSERT_LE(std::fabs(sin_t[p * head_dim / 2 + i] - std::sin(angle)), std::ldexp(1.0, -23))
          << p << " " << i;
    }
  }
  // The default scaling leaves the tables bit for bit as they were.
  std::vector<float> a(64 * 32), b(a.size()), c(a.size()), d(a.size());
  MakeRopeTables(64, 64, theta, a.data(), b.data());
  MakeRopeTables(64, 64, theta, c.data(), d.data(), RopeScaling{});
  EXPECT_EQ(FirstBitDifference(a.data(), c.data(), a.size()), "");
  EXPECT_EQ(FirstBitDifference(b.data(), d.data(), b.size()), "");
}

TEST(KernelsRope, Avx2EqualsReferenceAndRotates) {
  std::mt19937_64 rng(8);
  for (int64_t head_dim : {2, 14, 64, 128}) {
    const int64_t M = 4, heads = 3, max_pos = 100;
    std::vector<float> cos_t(max_pos * head_dim / 2), sin_t(cos_t.size());
    MakeRopeTables(max_pos, head_dim, 10000.0, cos_t.data(), sin_t.data());
    const std::vector<int32_t> positions = {0, 1, 57, 99};
    const auto x = RandomVector(rng, M * heads * head_dim);
    auto ref = x, simd = x;
    Rope(Ctx(Impl::kReference), ref.data(), M, heads, head_dim, positions.data(), cos_t.data(),
         sin_t.data());
    Rope(Ctx(Impl::kAuto), simd.data(), M, heads, head_dim, positions.data(), cos_t.data(),
         sin_t.data());
    ASSERT_EQ(FirstBitDifference(ref.data(), simd.data(), ref.size()), "") << head_dim;
    const int64_t half = head_dim / 2;
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < half; ++i) {
          const int64_t o = (m * heads + h) * head_dim;
          const double angle = positions[m] / std::pow(10000.0, 2.0 * i / head_dim);
          const double x1 = x[o + i], x2 = x[o + i + half];
          ASSERT_NEAR(ref[o + i], x1 * std::cos(angle) - x2 * std::sin(angle), 1e-5);
          ASSERT_NEAR(ref[o + i + half], x2 * std::cos(angle) + x1 * std::sin(angle), 1e-5);
        }
      }
    }
  }
}

TEST(KernelsSiluMul, Avx2EqualsReferenceAndFloat64) {
  std::mt19937_64 rng(9);
  auto pool = ThreadPool::Create(2);
  for (int64_t n : {1, 7, 33, 4864, 10001}) {
    auto gate = RandomVector(rng, n, 4.0f);
    gate[0] = -120.0f;  // Exp(120) = inf: silu -> -0
    const auto up = RandomVector(rng, n);
    std::vector<float> ref(n), simd(n);
    SiluMul(Ctx(Impl::kReference), gate.data(), up.data(), n, ref.data());
    SiluMul(Ctx(Impl::kAuto, Numerics::kCanonical, pool.get()), gate.data(), up.data(), n,
            simd.data());
    ASSERT_EQ(FirstBitDifference(ref.data(), simd.data(), n), "") << n;
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[i];
      const double exact = g / (1.0 + std::exp(-g)) * up[i];
      ASSERT_NEAR(ref[i], exact, 1e-6 * std::fabs(exact) + 1e-30) << i;
    }
  }
}

// GeGLU (Gemma): gelu_pytorch_tanh(gate) * up against torch's formula in float64,
// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), and the SIMD path bit for bit.
TEST(KernelsGeluTanhMul, SimdEqualsReferenceAndFloat64) {
  std::mt19937_64 rng(19);
  auto pool = ThreadPool::Create(2);
  for (int64_t n : {1, 7, 33, 6912, 10001}) {
    auto gate = RandomVector(rng, n, 6.0f);
    gate[0] = -120.0f;  // Exp(-t) = inf: gelu -> -0
    const auto up = RandomVector(rng, n);
    std::vector<float> ref(n), simd(n);
    GeluTanhMul(Ctx(Impl::kReference), gate.data(), up.data(), n, ref.data());
    GeluTanhMul(Ctx(Impl::kAuto, Numerics::kCanonical, pool.get()), gate.data(), up.data(), n,
                simd.data());
    ASSERT_EQ(FirstBitDifference(ref.data(), simd.data(), n), "") << n;
    EXPECT_EQ(ref[0], 0.0f);
    EXPECT_TRUE(std::signbit(ref[0]) != std::signbit(up[0]));
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[i];
      const double exact =
          0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
      // Near the zero of 1 + tanh (g very negative) the absolute error of the f32 chain counts.
      ASSERT_NEAR(ref[i], exact, 2e-6 * std::fabs(exact) + 1e-7 * std::fabs(up[i])) << g;
    }
  }
}

// Soft-capping (Gemma's final_logit_softcapping): cap * tanh(x / cap) within a few ulps of
// float64, odd, bounded by the cap, NaN kept.
TEST(KernelsSoftCap, AgainstFloat64) {
  std::mt19937_64 rng(20);
  std::uniform_real_distribution<float> wide(-200.0f, 200.0f);
  for (float cap : {30.0f, 0.75f}) {
    for (int i = 0; i < 20000; ++i) {
      const float x = i < 10000 ? wide(rng) : wide(rng) * 1e-3f;
      const float got = canonical::SoftCap(x, cap);
      const double exact = cap * std::tanh(static_cast<double>(x) / cap);
      ASSERT_NEAR(got, exact, 4e-7 * cap) << x << " cap " << cap;
      ASSERT_LE(std::fabs(got), cap);
      ASSERT_EQ(Bits(canonical::SoftCap(-x, cap)), Bits(-got)) << x;
    }
    EXPECT_EQ(canonical::SoftCap(INFINITY, cap), cap);
    EXPECT_TRUE(std::isnan(canonical::SoftCap(NAN, cap)));
  }
}

// Embedding with Gemma's scale: each element one rounded multiply of the exact conversion, on
// every path; a scale of 1 leaves the plain lookup.
TEST(KernelsEmbedding, ScaleIsOneRoundedMultiply) {
  std::mt19937_64 rng(22);
  const int64_t V = 50, D = 72;
  std::vector<uint16_t> table(V * D);
  for (auto& t : table) t = F32ToBf16RoundNearestEven(RandomVector(rng, 1, 3.0f)[0]);
  WeightView w{table.data(), DType::kBF16, V, D};
  const std::vector<int32_t> ids = {3, 0, 49, 3};
  const float scale = 34.0f;  // bf16(sqrt(1152)): gemma-3-1b's
  for (Impl impl : {Impl::kReference, Impl::kAuto}) {
    std::vector<float> plain(ids.size() * D), scaled(ids.size() * D);
    Embedding(Ctx(impl), w, ids.data(), 4, plain.data());
    Embedding(Ctx(impl), w, ids.data(), 4, scaled.data(), scale);
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_EQ(plain[i], Bf16ToF32(table[ids[i / D] * D + i % D]));
      ASSERT_EQ(Bits(scaled[i]), Bits(plain[i] * scale)) << i;
    }
  }
}

TEST(KernelsAdd, Avx2EqualsReference) {
  std::mt19937_64 rng(10);
  for (int64_t n : {1, 9, 1025}) {
    const auto a = RandomVector(rng, n), b = RandomVector(rng, n);
    std::vector<float> ref(n), simd(n);
    Add(Ctx(Impl::kReference), a.data(), b.data(), n, ref.data());
    Add(Ctx(Impl::kAuto), a.data(), b.data(), n, simd.data());
    ASSERT_EQ(FirstBitDifference(ref.data(), simd.data(), n), "");
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(ref[i], a[i] + b[i]);
  }
}

// float64 two-pass softmax attention.
std::vector<double> AttentionFloat64(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, const AttentionCase& c) {
  std::vector<double> out(c.n_heads * c.head_dim);
  const int64_t group = c.n_heads / c.n_kv_heads, stride = c.n_kv_heads * c.head_dim;
  for (int64_t h = 0; h < c.n_heads; ++h) {
    const int64_t kvh = h / group;
    std::vector<double> s(c.pos + 1);
    double mx = -INFINITY;
    for (int64_t j = 0; j <= c.pos; ++j) {
      double d = 0;
      for (int64_t i = 0; i < c.head_dim; ++i) {
        d += static_cast<double>(q[h * c.head_dim + i]) * k[j * stride + kvh * c.head_dim + i];
      }
      s[j] = d / std::sqrt(static_cast<double>(c.head_dim));
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (auto& x : s) sum += (x = std::exp(x - mx));
    for (int64_t i = 0; i < c.head_dim; ++i) {
      double acc = 0;
      for (int64_t j = 0; j <= c.pos; ++j) acc += s[j] * v[j * stride + kvh * c.head_dim + i];
      out[h * c.head_dim + i] = acc / sum;
    }
  }
  return out;
}

TEST(KernelsAttention, CanonicalAvx2EqualsReferenceAndFloat64) {
  std::mt19937_64 rng(11);
  auto pool = ThreadPool::Create(2);
  const AttentionCase cases[] = {{2, 1, 64, 0},  {14, 2, 64, 5},   {4, 4, 128, 31}, {8, 2, 128, 33},
                                 {2, 1, 12, 40}, {4, 2, 64, 1100}, {2, 2, 8, 7}};
  for (const auto& c : cases) {
    const int64_t rows = c.pos + 1;
    const auto q = RandomVector(rng, c.n_heads * c.head_dim);
    const auto k = RandomVector(rng, rows * c.n_kv_heads * c.head_dim);
    const auto v = RandomVector(rng, rows * c.n_kv_heads * c.head_dim);
    const auto ref = RunAttention(Ctx(Impl::kReference), q, k, v, c);
    const auto simd = RunAttention(Ctx(Impl::kAuto), q, k, v, c);
    const auto simd2 = RunAttention(Ctx(Impl::kAuto, Numerics::kCanonical, pool.get()), q, k, v, c);
    const std::string where = "heads " + std::to_string(c.n_heads) + "/" +
                              std::to_string(c.n_kv_heads) + " d " + std::to_string(c.head_dim) +
                              " pos " + std::to_string(c.pos);
    ASSERT_EQ(FirstBitDifference(ref.data(), simd.data(), ref.size()), "") << where;
    ASSERT_EQ(FirstBitDifference(ref.data(), simd2.data(), ref.size()), "") << where;
    const auto exact = AttentionFloat64(q, k, v, c);
    const auto fast = RunAttention(Ctx(Impl::kAuto, Numerics::kFast), q, k, v, c);
    const auto fast_ref = RunAttention(Ctx(Impl::kReference, Numerics::kFast), q, k, v, c);
    for (size_t i = 0; i < ref.size(); ++i) {
      // Outputs are convex combinations of V (|v| ~ 1): an absolute bound.
      ASSERT_NEAR(ref[i], exact[i], 2e-5) << where << " element " << i;
      ASSERT_NEAR(fast[i], exact[i], 2e-5) << where << " element " << i;
      ASSERT_NEAR(fast_ref[i], exact[i], 2e-5) << where << " element " << i;
    }
  }
}

TEST(KernelsAttention, PrefillEqualsDecode) {
  // The output at position t reads only cache rows 0..t: rows after t (written by a
  // longer prefill) change nothing, bit for bit.
  std::mt19937_64 rng(12);
  const int64_t heads = 4, kv_heads = 2, dim = 64, total = 80;
  const auto k = RandomVector(rng, total * kv_heads * dim);
  const auto v = RandomVector(rng, total * kv_heads * dim);
  const auto q = RandomVector(rng, heads * dim);
  for (Impl impl : {Impl::kReference, Impl::kAuto}) {
    for (int64_t t : {0, 7, 8, 33, 79}) {
      const AttentionCase c{heads, kv_heads, dim, t};
      std::vector<float> k_short(k.begin(), k.begin() + (t + 1) * kv_heads * dim);
      std::vector<float> v_short(v.begin(), v.begin() + (t + 1) * kv_heads * dim);
      const auto decode = RunAttention(Ctx(impl), q, k_short, v_short, c);
      auto k_long = k, v_long = v;
      for (size_t i = (t + 1) * kv_heads * dim; i < k_long.size(); ++i) {
        k_long[i] = 1e30f;
        v_long[i] = NAN;
      }
      const auto prefill = RunAttention(Ctx(impl), q, k_long, v_long, c);
      ASSERT_EQ(FirstBitDifference(decode.data(), prefill.data(), decode.size()), "") << t;
    }
  }
}

}  // namespace
}  // namespace trace::kernels
