// Quantized weights (docs/numerics.md, "Quantized weights"): ggml's blocks of 32 and K-quant
// blocks, made or dequantized here from the format's description (testkit/kquant_reference.h),
// against every CPU path's MatMul, in both layouts, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "testkit/kquant_reference.h"
#include "tests/kernels/test_util.h"

namespace trace::kernels {
namespace {

using testing::Bits;
using testing::Ctx;
using testing::FirstBitDifference;
using testing::RandomVector;
using testing::RunMatMul;
using testing::SimdPaths;

// K-quant blocks of random bytes (any f16 scale but inf / NaN) dequantize, through
// kernels/canonical.h, to the values the test's own dequantizer computes in double and rounds
// once (testkit/kquant_reference.h): every weight bit for bit.
TEST(KernelsKQuant, DequantizationEqualsTheFormatsDefinition) {
  std::mt19937_64 rng(31);
  for (testkit::KQuant type :
       {testkit::KQuant::kQ4_K, testkit::KQuant::kQ5_K, testkit::KQuant::kQ6_K}) {
    const size_t bytes = testkit::KQuantBlockBytes(type);
    for (int trial = 0; trial < 400; ++trial) {
      std::vector<uint8_t> block(bytes);
      for (auto& b : block) b = static_cast<uint8_t>(rng());
      // f16 scales with exponent below 31 (finite), sometimes subnormal or zero.
      for (size_t at :
           type == testkit::KQuant::kQ6_K ? std::vector<size_t>{208} : std::vector<size_t>{0, 2}) {
        block[at + 1] = static_cast<uint8_t>(block[at + 1] % (trial % 7 == 0 ? 4 : 0x78));
      }
      float got[256];
      if (type == testkit::KQuant::kQ4_K) canonical::DequantizeQ4_K(block.data(), got);
      if (type == testkit::KQuant::kQ5_K) canonical::DequantizeQ5_K(block.data(), got);
      if (type == testkit::KQuant::kQ6_K) canonical::DequantizeQ6_K(block.data(), got);
      const std::vector<float> want = testkit::DequantizeKQuantBlock(type, block.data());
      ASSERT_EQ(FirstBitDifference(want.data(), got, 256), "")
          << "type " << static_cast<int>(type) << " trial " << trial;
    }
  }
}

// A K-quant matrix gives, on every path, with and without a pool, in decode and prefill, in
// the file's row-major layout (dequantized row by row) and in kInterleaved32 (dequantized in
// registers, kernels/kquant_interleaved.h), the bits of the F32 matrix of its dequantized
// values; both layouts convert rows and single weights to those values. N = 70 leaves the
// last group of 32 rows short; M = 1 is decode, 3 and 9 prefill (one and two micro-tiles);
// K = 1024 gives every lane one block; K = 8448 (264 blocks) wraps every lane eight times and
// eight lanes a ninth.
TEST(KernelsKQuant, MatMulEqualsTheDequantizedMatrixOnEveryPath) {
  std::mt19937_64 rng(32);
  auto pool = ThreadPool::Create(3);
  const std::pair<testkit::KQuant, DType> types[] = {{testkit::KQuant::kQ4_K, DType::kQ4_K},
                                                     {testkit::KQuant::kQ5_K, DType::kQ5_K},
                                                     {testkit::KQuant::kQ6_K, DType::kQ6_K}};
  for (const auto& [type, dtype] : types) {
    for (const auto& [N, K] :
         {std::pair<int64_t, int64_t>{37, 256}, {70, 768}, {161, 1024}, {33, 8448}}) {
      const std::string blocks = testkit::QuantizeKQuant(type, RandomVector(rng, N * K, 0.1f));
      const std::vector<float> values = testkit::DequantizeKQuant(type, blocks);
      const WeightView kq{blocks.data(), dtype, N, K};
      const WeightView f32{values.data(), DType::kF32, N, K};
      EXPECT_EQ(WeightBytes(dtype, N, K), blocks.size());
      std::vector<uint8_t> packed(InterleavedWeightsBytes(kq));
      const WeightView kqi = InterleaveWeights(kq, packed.data());
      ASSERT_EQ(kqi.layout, WeightLayout::kInterleaved32);
      ASSERT_EQ(kqi.dtype, dtype);
      const auto bias = RandomVector(rng, N);
      std::vector<Impl> paths = SimdPaths();
      paths.push_back(Impl::kReference);
      for (int64_t M : {1, 3, 9}) {
        const auto x = RandomVector(rng, M * K, 2.0f);
        const auto want = RunMatMul(Ctx(Impl::kReference), x, M, f32, bias.data());
        for (Impl impl : paths) {
          for (const WeightView& w : {kq, kqi}) {
            for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool.get()}) {
              const auto got = RunMatMul(Ctx(impl, Numerics::kCanonical, p), x, M, w, bias.data());
              ASSERT_EQ(FirstBitDifference(want.data(), got.data(), want.size()), "")
                  << DTypeName(dtype) << " N " << N << " K " << K << " M " << M << " "
                  << CpuIsaPathName(impl)
                  << (w.layout == WeightLayout::kRowMajor ? " row-major" : " interleaved");
            }
          }
        }
      }
      std::vector<float> row(static_cast<size_t>(K));
      for (const WeightView& w : {kq, kqi}) {
        for (int64_t n : {int64_t{0}, int64_t{31}, N - 1}) {
          WeightRowToF32(w, n, K, row.data());
          ASSERT_EQ(FirstBitDifference(row.data(), values.data() + n * K, K), "")
              << DTypeName(dtype) << " row " << n;
        }
        EXPECT_EQ(Bits(WeightAt(w, 5, K - 3)), Bits(values[5 * K + K - 3]));
        EXPECT_EQ(Bits(WeightAt(w, N - 1, 17)), Bits(values[(N - 1) * K + 17]));
      }
    }
  }
}

// The interleaved copy of a K-quant matrix is within 3% of the file's bytes (the engine keeps
// only that copy: resident weights stay near the file's size), exactly the documented record
// size (kernels/kquant_interleaved.h).
TEST(KernelsKQuant, InterleavedCopyIsNearTheFilesSize) {
  const std::pair<DType, int64_t> records[] = {
      {DType::kQ4_K, 128 + 8 * 576}, {DType::kQ5_K, 128 + 8 * 704}, {DType::kQ6_K, 128 + 8 * 832}};
  for (const auto& [dtype, record] : records) {
    const WeightView w{nullptr, dtype, 4864, 896 / 128 * 256};  // 7 super-blocks per row
    const auto bytes = static_cast<double>(InterleavedWeightsBytes(w));
    EXPECT_EQ(bytes, 152.0 * 7 * record) << DTypeName(dtype);
    const double file = static_cast<double>(WeightBytes(dtype, w.rows, w.cols));
    EXPECT_LT(bytes / file, 1.03) << DTypeName(dtype);
    EXPECT_GE(bytes / file, 1.0) << DTypeName(dtype);
  }
}

// Q8_0 and Q4_0 (GGUF): blocks of an f16 scale and 32 int8 (or 32 nibbles, low ones first),
// made here from ggml's description. Every path, both layouts, decode and prefill, 1 and 2
// threads: bit for bit the MatMul of the dequantized f32 matrix (f16 scale x int8, exact), and
// the same for Embedding.
TEST(KernelsMatMul, Q8_0AndQ4_0EqualTheirDequantizedMatricesOnEveryPath) {
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<int> q(-128, 127);
  auto pool = ThreadPool::Create(2);
  for (const auto& [N, K] :
       {std::pair<int64_t, int64_t>{1, 32}, {37, 64}, {100, 96}, {129, 896}, {64, 4864}}) {
    const int64_t blocks = K / 32;
    std::string bytes;
    std::vector<float> dequantized(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t b = 0; b < blocks; ++b) {
        // Scales over the f16 range, subnormal and zero included.
        const float scale = b % 7 == 6 ? 0.0f
                                       : std::ldexp(1.0f + (rng() % 1024) / 1024.0f,
                                                    static_cast<int>(rng() % 30) - 24);
        const uint16_t d = F32ToF16RoundNearestEven(scale);
        bytes.append(reinterpret_cast<const char*>(&d), 2);
        for (int64_t k = 0; k < 32; ++k) {
          const int8_t v = static_cast<int8_t>(q(rng));
          bytes.push_back(static_cast<char>(v));
          dequantized[n * K + b * 32 + k] = F16ToF32(d) * static_cast<float>(v);
        }
      }
    }
    const WeightView q8{bytes.data(), DType::kQ8_0, N, K};
    const WeightView f32{dequantized.data(), DType::kF32, N, K};
    std::vector<uint8_t> packed(InterleavedWeightsBytes(q8));
    const WeightView q8i = InterleaveWeights(q8, packed.data());
    // A Q4_0 matrix from the same scales: nibbles (q >> 4) + 8, values d * (nibble - 8).
    std::string q4_bytes;
    std::vector<float> q4_values(dequantized.size());
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t b = 0; b < blocks; ++b) {
        const char* block = bytes.data() + (n * blocks + b) * 34;
        q4_bytes.append(block, 2);
        uint16_t d;
        std::memcpy(&d, block, 2);
        uint8_t nib[32];
        for (int k = 0; k < 32; ++k) {
          nib[k] = static_cast<uint8_t>((static_cast<int8_t>(block[2 + k]) >> 4) + 8);
          q4_values[n * K + b * 32 + k] = F16ToF32(d) * static_cast<float>(nib[k] - 8);
        }
        for (int k = 0; k < 16; ++k) {
          q4_bytes.push_back(static_cast<char>(nib[k] | (nib[k + 16] << 4)));
        }
      }
    }
    const WeightView q4{q4_bytes.data(), DType::kQ4_0, N, K};
    const WeightView q4_f32{q4_values.data(), DType::kF32, N, K};
    std::vector<uint8_t> packed4(InterleavedWeightsBytes(q4));
    const WeightView q4i = InterleaveWeights(q4, packed4.data());
    EXPECT_EQ(q4i.dtype, DType::kQ8_0);
    for (int64_t M : {1, 3, 9, 130}) {
      const auto x = RandomVector(rng, M * K, 2.0f);
      std::vector<float> want(M * N), want4(M * N), got(M * N);
      MatMul(Ctx(Impl::kReference), x.data(), M, f32, nullptr, want.data());
      MatMul(Ctx(Impl::kReference), x.data(), M, q4_f32, nullptr, want4.data());
      std::vector<Impl> paths = SimdPaths();
      paths.push_back(Impl::kReference);
      for (Impl impl : paths) {
        for (const WeightView& w : {q4, q4i}) {
          MatMul(Ctx(impl), x.data(), M, w, nullptr, got.data());
          ASSERT_EQ(FirstBitDifference(want4.data(), got.data(), M * N), "")
              << "Q4_0 N " << N << " K " << K << " M " << M << " " << CpuIsaPathName(impl);
        }
        for (const WeightView& w : {q8, q8i}) {
          for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool.get()}) {
            std::fill(got.begin(), got.end(), NAN);
            MatMul(Ctx(impl, Numerics::kCanonical, p), x.data(), M, w, nullptr, got.data());
            ASSERT_EQ(FirstBitDifference(want.data(), got.data(), M * N), "")
                << "N " << N << " K " << K << " M " << M << " " << CpuIsaPathName(impl)
                << (w.layout == WeightLayout::kRowMajor ? " row-major" : " interleaved");
          }
        }
      }
    }
    const std::vector<int32_t> ids = {0, static_cast<int32_t>(N - 1), static_cast<int32_t>(N / 2)};
    std::vector<float> want(3 * K), got(3 * K);
    Embedding(Ctx(Impl::kReference), f32, ids.data(), 3, want.data());
    for (const WeightView& w : {q8, q8i}) {
      Embedding(Ctx(Impl::kAuto), w, ids.data(), 3, got.data());
      ASSERT_EQ(FirstBitDifference(want.data(), got.data(), 3 * K), "") << "embedding N " << N;
    }
  }
}

// ggml's other blocks of 32, built here from the format's description: Q5_0 (f16 d, 4 bytes of
// fifth bits, 16 bytes of nibbles: element k < 16 the low nibble of byte k and bit k of qh,
// element k + 16 the high nibble and bit k + 16; weight d * (q - 16)), Q4_1 (f16 d, f16 m,
// nibbles; d * q + m) and Q5_1 (f16 d, f16 m, qh, nibbles; d * q + m). Each weight is computed
// in double and rounded once. Every path, both layouts, decode and prefill, 1 and 2 threads,
// equals the MatMul of the F32 matrix of those values; so do Embedding and WeightAt. N = 37 and
// 100 leave the last group of 32 rows short.
TEST(KernelsMatMul, Q5_0Q4_1AndQ5_1EqualTheirDequantizedMatricesOnEveryPath) {
  std::mt19937_64 rng(37);
  auto pool = ThreadPool::Create(2);
  struct Format {
    DType dtype;
    bool min, fifth;
  };
  for (const Format f : {Format{DType::kQ5_0, false, true}, Format{DType::kQ4_1, true, false},
                         Format{DType::kQ5_1, true, true}}) {
    for (const auto& [N, K] : {std::pair<int64_t, int64_t>{37, 64}, {100, 896}, {33, 1056}}) {
      std::string bytes;
      std::vector<float> values(static_cast<size_t>(N * K));
      auto f16 = [&](float v) {
        const uint16_t h = F32ToF16RoundNearestEven(v);
        bytes.append(reinterpret_cast<const char*>(&h), 2);
        return static_cast<double>(F16ToF32(h));
      };
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t b = 0; b < K / 32; ++b) {
          // Scales over the f16 range, subnormal and zero included; mins of either sign.
          const float scale = b % 7 == 6 ? 0.0f
                                         : std::ldexp(1.0f + (rng() % 1024) / 1024.0f,
                                                      static_cast<int>(rng() % 30) - 24);
          const double d = f16(scale);
          const double m =
              f.min ? f16(std::ldexp((rng() % 2 ? -1.0f : 1.0f) * (rng() % 2048) / 1024.0f,
                                     static_cast<int>(rng() % 20) - 16))
                    : 0.0;
          int q[32];
          uint32_t qh = 0;
          for (int k = 0; k < 32; ++k) {
            q[k] = static_cast<int>(rng() % (f.fifth ? 32 : 16));
            qh |= static_cast<uint32_t>(q[k] >> 4) << k;
            const double v = f.min ? d * q[k] + m : d * (q[k] - 16);
            values[n * K + b * 32 + k] = static_cast<float>(v);
          }
          if (f.fifth) bytes.append(reinterpret_cast<const char*>(&qh), 4);
          for (int k = 0; k < 16; ++k) {
            bytes.push_back(static_cast<char>((q[k] & 0xF) | ((q[k + 16] & 0xF) << 4)));
          }
        }
      }
      const WeightView w{bytes.data(), f.dtype, N, K};
      ASSERT_EQ(WeightBytes(f.dtype, N, K), bytes.size()) << DTypeName(f.dtype);
      const WeightView f32{values.data(), DType::kF32, N, K};
      std::vector<uint8_t> packed(InterleavedWeightsBytes(w));
      const std::vector<WeightView> layouts = {w, InterleaveWeights(w, packed.data())};
      // Q5_0 becomes Q8_0's int8 layout; Q4_1 / Q5_1 keep their nibbles, in the file's bytes.
      if (f.dtype == DType::kQ5_0) {
        EXPECT_EQ(layouts[1].dtype, DType::kQ8_0);
      } else {
        EXPECT_EQ(layouts[1].dtype, f.dtype);
        EXPECT_EQ(packed.size(), (N + 31) / 32 * 32 * WeightBytes(f.dtype, 1, K));
      }
      std::vector<Impl> paths = SimdPaths();
      paths.push_back(Impl::kReference);
      for (int64_t M : {1, 3, 9}) {
        const auto x = RandomVector(rng, M * K, 2.0f);
        const auto want = RunMatMul(Ctx(Impl::kReference), x, M, f32, nullptr);
        for (Impl impl : paths) {
          for (const WeightView& view : layouts) {
            for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool.get()}) {
              const auto got = RunMatMul(Ctx(impl, Numerics::kCanonical, p), x, M, view, nullptr);
              ASSERT_EQ(FirstBitDifference(want.data(), got.data(), want.size()), "")
                  << DTypeName(f.dtype) << " N " << N << " K " << K << " M " << M << " "
                  << CpuIsaPathName(impl)
                  << (view.layout == WeightLayout::kRowMajor ? " row-major" : " interleaved");
            }
          }
        }
      }
      const std::vector<int32_t> ids = {0, static_cast<int32_t>(N - 1), 7};
      std::vector<float> want(3 * K), got(3 * K);
      Embedding(Ctx(Impl::kReference), f32, ids.data(), 3, want.data());
      for (const WeightView& view : layouts) {
        Embedding(Ctx(Impl::kAuto), view, ids.data(), 3, got.data());
        ASSERT_EQ(FirstBitDifference(want.data(), got.data(), 3 * K), "") << DTypeName(f.dtype);
        EXPECT_EQ(Bits(WeightAt(view, N - 1, K - 1)), Bits(values[N * K - 1]));
      }
    }
  }
}

}  // namespace
}  // namespace trace::kernels
