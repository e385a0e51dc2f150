// The CUDA kernels' schedules (kernels/cuda/schedule/*.h) run on the CPU: for every launch the
// GPU tests make (tests/gpu/gpu_shapes.h) and the launches of the whole-model GPU tests at the
// real widths of qwen3-0.6b and qwen2.5-0.5b, the very block bodies the kernels execute run
// over a simulated grid (HostBlock: every thread of a block, phase by phase) and every output
// bit is compared with the CPU reference. No GPU and no CUDA toolkit are needed: this is how
// a mistake in the order of a CUDA kernel's arithmetic fails CPU-only CI.
//
// A launch whose simulation would exceed a budget of fused multiply-adds runs a
// deterministic subset of its blocks: every block on the grid's edges (first and last in x
// and y, where the bounds checks act) and evenly spaced blocks in between; the test checks
// that those blocks wrote exactly their outputs, and that no other output was written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/splitmix64.h"
#include "engine/model_init.h"
#include "kernels/canonical.h"
#include "kernels/cuda/schedule/attention.h"
#include "kernels/cuda/schedule/elementwise.h"
#include "kernels/cuda/schedule/gemm.h"
#include "kernels/cuda/schedule/gemv.h"
#include "kernels/cuda/schedule/host_block.h"
#include "kernels/cuda/schedule/rms_norm.h"
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"
#include "tests/gpu/gpu_shapes.h"
#include "tests/kernels/test_util.h"

namespace trace::kernels {
namespace {

namespace sc = cuda::schedule;
namespace shapes = trace::gpu_shapes;
using testing::Bits;

constexpr uint32_t kUnwritten = 0x7fc0dead;  // a NaN no kernel produces
constexpr int64_t kFmaBudgetPerLaunch = 2'000'000;

float Unwritten() {
  float f;
  std::memcpy(&f, &kUnwritten, 4);
  return f;
}

KernelContext Reference() {
  KernelContext ctx;
  ctx.impl = Impl::kAuto;  // AVX2 where present: bitwise the scalar reference, faster
  return ctx;
}

ThreadPool* Pool() {
  static auto pool = ThreadPool::Create(2);
  return pool.get();
}

// The blocks of a launch to run: all of them, or (over budget) the four corners of the grid
// (where the bounds checks in x and y act) plus up to `max_blocks` evenly spaced ones.
std::vector<std::pair<uint32_t, uint32_t>> ChooseBlocks(const sc::LaunchDims& d,
                                                        int64_t max_blocks) {
  const int64_t total = static_cast<int64_t>(d.grid_x) * d.grid_y;
  std::set<int64_t> chosen;
  if (total <= max_blocks + 4) {
    for (int64_t i = 0; i < total; ++i) chosen.insert(i);
  } else {
    chosen = {0, d.grid_x - 1, total - d.grid_x, total - 1};
    for (int64_t j = 1; j <= max_blocks; ++j) chosen.insert(j * (total - 1) / (max_blocks + 1));
  }
  std::vector<std::pair<uint32_t, uint32_t>> blocks;
  for (int64_t i : chosen) {
    blocks.emplace_back(static_cast<uint32_t>(i % d.grid_x), static_cast<uint32_t>(i / d.grid_x));
  }
  return blocks;
}

// Runs body(block, bx, by) for the chosen blocks on two threads (blocks are independent),
// with the race check (host_block.h): throws RaceError naming the first race.
template <class Body>
void Simulate(const sc::LaunchDims& d, const std::vector<std::pair<uint32_t, uint32_t>>& blocks,
              Body body) {
  std::mutex mu;
  std::string race;
  ParallelFor(Pool(), static_cast<int64_t>(blocks.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::string r = sc::SimulateBlock(d, blocks[i].first, blocks[i].second, body);
      std::lock_guard<std::mutex> lock(mu);
      if (race.empty()) race = std::move(r);
    }
  });
  if (!race.empty()) throw sc::RaceError(race);
}

// Outputs inside `written` must equal `expected` bit for bit; every other output must be
// untouched. Returns "" or the first problem.
template <class Inside>
std::string CompareWritten(const std::vector<float>& expected, const std::vector<float>& got,
                           int64_t cols, Inside inside) {
  for (size_t i = 0; i < expected.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i) / cols, col = static_cast<int64_t>(i) % cols;
    if (inside(row, col)) {
      if (Bits(got[i]) != Bits(expected[i])) {
        return "output (" + std::to_string(row) + ", " + std::to_string(col) + "): reference " +
               std::to_string(expected[i]) + " (0x" + std::to_string(Bits(expected[i])) +
               ") vs schedule " + std::to_string(got[i]) + " (bits " +
               std::to_string(Bits(got[i])) + ")";
      }
    } else if (Bits(got[i]) != kUnwritten) {
      return "output (" + std::to_string(row) + ", " + std::to_string(col) +
             ") written by a block that does not own it";
    }
  }
  return "";
}

// ---- MatMul: the GEMV and the three GEMM tiles -------------------------------------------

enum class MatMulKernel { kGemv, kGemm128x128, kGemm64x64, kGemm64x32 };
const char* KernelName(MatMulKernel k) {
  switch (k) {
    case MatMulKernel::kGemv:
      return "gemv";
    case MatMulKernel::kGemm128x128:
      return "gemm 128x128";
    case MatMulKernel::kGemm64x64:
      return "gemm 64x64";
    case MatMulKernel::kGemm64x32:
      return "gemm 64x32";
  }
  return "";
}

// Operands of a MatMul test: x [M, K] (at an offset of x_offset floats from a 16-byte
// aligned start, to reach the GEMV's scalar path), w [N, K] in `dtype`, an optional bias.
// Filled by a fast integer generator: the lm_head of the real presets has 150 million
// weights.
struct MatMulData {
  int64_t M = 0, N = 0, K = 0;
  std::vector<float> x_storage;
  const float* x = nullptr;
  DType dtype = DType::kBF16;
  std::vector<uint8_t> w;
  std::vector<float> bias;
  WeightView view() const { return WeightView{w.data(), dtype, N, K}; }
};

MatMulData MakeMatMul(DType dtype, const shapes::MatMulShape& s, bool bias, int64_t x_offset) {
  SplitMix64 rng(static_cast<uint64_t>(s.M * 1000003 + s.N * 101 + s.K));
  auto uniform = [&rng](float scale) {  // [-scale, scale)
    return static_cast<float>(static_cast<int32_t>(rng.Next() >> 40) - (1 << 23)) * 0x1p-23f *
           scale;
  };
  MatMulData d;
  d.M = s.M;
  d.N = s.N;
  d.K = s.K;
  d.dtype = dtype;
  d.x_storage.assign(static_cast<size_t>(x_offset + s.M * s.K), 0.0f);
  for (int64_t i = 0; i < s.M * s.K; ++i) d.x_storage[x_offset + i] = uniform(1.0f);
  d.x = d.x_storage.data() + x_offset;
  // Weights of magnitude about 1/sqrt(K) with random sign and mantissa; bf16/f16 straight
  // from random bits (four per draw: the LM head has 150 million).
  const int scale_exp =
      -static_cast<int>(std::ceil(std::log2(std::sqrt(static_cast<double>(s.K)))));
  d.w.resize(static_cast<size_t>(s.N * s.K) * DTypeSize(dtype));
  if (dtype == DType::kF32) {
    for (int64_t i = 0; i < s.N * s.K; ++i) {
      const float v = std::ldexp(uniform(1.0f), scale_exp);
      std::memcpy(d.w.data() + 4 * i, &v, 4);
    }
  } else {
    uint16_t* w16 = reinterpret_cast<uint16_t*>(d.w.data());
    const int mantissa_bits = dtype == DType::kBF16 ? 7 : 10;
    const int bias = dtype == DType::kBF16 ? 127 : 15;
    for (int64_t i = 0; i < s.N * s.K; i += 4) {
      uint64_t z = rng.Next();
      for (int64_t j = i; j < std::min(i + 4, s.N * s.K); ++j, z >>= 16) {
        const uint16_t sign = static_cast<uint16_t>((z & 1u) << 15);
        const uint16_t mantissa = static_cast<uint16_t>((z >> 1) & ((1u << mantissa_bits) - 1));
        const uint16_t exponent = static_cast<uint16_t>(bias + scale_exp - 1 + ((z >> 12) & 1u));
        w16[j] = sign | static_cast<uint16_t>(exponent << mantissa_bits) | mantissa;
      }
    }
  }
  if (bias) {
    d.bias.resize(static_cast<size_t>(s.N));
    for (auto& b : d.bias) b = uniform(0.1f);
  }
  return d;
}

template <DType D, int MT>
void RunGemv(const sc::GemvArgs& args, const sc::LaunchDims& dims,
             const std::vector<std::pair<uint32_t, uint32_t>>& blocks) {
  Simulate(dims, blocks, [&](sc::HostBlock& block, uint32_t bx, uint32_t) {
    sc::GemvBlock<D, MT>(block, bx, args);
  });
}

template <DType D>
void DispatchGemv(int mt, const sc::GemvArgs& args, const sc::LaunchDims& dims,
                  const std::vector<std::pair<uint32_t, uint32_t>>& blocks) {
  switch (mt) {
    case 1:
      return RunGemv<D, 1>(args, dims, blocks);
    case 2:
      return RunGemv<D, 2>(args, dims, blocks);
    case 3:
      return RunGemv<D, 3>(args, dims, blocks);
    case 4:
      return RunGemv<D, 4>(args, dims, blocks);
    case 5:
      return RunGemv<D, 5>(args, dims, blocks);
    case 6:
      return RunGemv<D, 6>(args, dims, blocks);
    case 7:
      return RunGemv<D, 7>(args, dims, blocks);
    default:
      return RunGemv<D, 8>(args, dims, blocks);
  }
}

template <class Tile, DType D>
void RunGemm(const sc::GemmArgs& args, const sc::LaunchDims& dims,
             const std::vector<std::pair<uint32_t, uint32_t>>& blocks) {
  Simulate(dims, blocks, [&](sc::HostBlock& block, uint32_t bx, uint32_t by) {
    std::vector<float> xs(Tile::kXsFloats), ws(Tile::kWsFloats);  // the block's shared tiles
    sc::GemmBlock<Tile, D>(block, bx, by, args, xs.data(), ws.data());
  });
}

template <class Tile>
void DispatchGemm(DType dtype, const sc::GemmArgs& args, const sc::LaunchDims& dims,
                  const std::vector<std::pair<uint32_t, uint32_t>>& blocks) {
  switch (dtype) {
    case DType::kF32:
      return RunGemm<Tile, DType::kF32>(args, dims, blocks);
    case DType::kBF16:
      return RunGemm<Tile, DType::kBF16>(args, dims, blocks);
    case DType::kF16:
      return RunGemm<Tile, DType::kF16>(args, dims, blocks);
  }
}

// Simulates `kernel` on the launch the CUDA launcher would make for the first `M` rows of
// `d`; returns "" or the first difference. The reference is computed for the outputs of the
// simulated blocks only (a row of MatMul does not depend on the others: tested in
// KernelsMatMul). `simulated` receives the number of blocks run and in the grid.
std::string SimulateMatMul(MatMulKernel kernel, const MatMulData& d, int64_t M,
                           std::pair<int64_t, int64_t>* simulated = nullptr) {
  const int64_t N = d.N, K = d.K;
  std::vector<float> y(static_cast<size_t>(M * N), Unwritten());
  const float* bias = d.bias.empty() ? nullptr : d.bias.data();
  sc::LaunchDims dims;
  int64_t tile_n = 0, tile_m = 0;  // outputs of one block: N range of block x, M of block y
  switch (kernel) {
    case MatMulKernel::kGemv:
      dims = sc::GemvLaunch(N);
      tile_n = sc::kGemvWarpsPerBlock;
      tile_m = M;
      break;
    case MatMulKernel::kGemm128x128:
      dims = sc::GemmLaunch<sc::GemmTile128x128>(M, N);
      tile_m = tile_n = 128;
      break;
    case MatMulKernel::kGemm64x64:
      dims = sc::GemmLaunch<sc::GemmTile64x64>(M, N);
      tile_m = tile_n = 64;
      break;
    case MatMulKernel::kGemm64x32:
      dims = sc::GemmLaunch<sc::GemmTile64x32>(M, N);
      tile_m = 64;
      tile_n = 32;
      break;
  }
  const auto blocks =
      ChooseBlocks(dims, kFmaBudgetPerLaunch / std::max<int64_t>(1, tile_m * tile_n * K));
  if (simulated != nullptr) {
    *simulated = {static_cast<int64_t>(blocks.size()),
                  static_cast<int64_t>(dims.grid_x) * dims.grid_y};
  }
  if (kernel == MatMulKernel::kGemv) {
    const sc::GemvArgs args{d.x, M,    d.w.data(), N,
                            K,   bias, y.data(),   sc::GemvVectorOk(d.x, d.w.data(), K, d.dtype)};
    const int mt = sc::GemvRowsPerPass(M);
    switch (d.dtype) {
      case DType::kF32:
        DispatchGemv<DType::kF32>(mt, args, dims, blocks);
        break;
      case DType::kBF16:
        DispatchGemv<DType::kBF16>(mt, args, dims, blocks);
        break;
      case DType::kF16:
        DispatchGemv<DType::kF16>(mt, args, dims, blocks);
        break;
    }
  } else {
    const sc::GemmArgs args{d.x, M, d.w.data(), N, K, bias, y.data()};
    if (kernel == MatMulKernel::kGemm128x128)
      DispatchGemm<sc::GemmTile128x128>(d.dtype, args, dims, blocks);
    if (kernel == MatMulKernel::kGemm64x64)
      DispatchGemm<sc::GemmTile64x64>(d.dtype, args, dims, blocks);
    if (kernel == MatMulKernel::kGemm64x32)
      DispatchGemm<sc::GemmTile64x32>(d.dtype, args, dims, blocks);
  }
  // The reference for each simulated block's outputs, then every output checked.
  std::vector<float> expected(y.size(), Unwritten());
  for (const auto& [bx, by] : blocks) {
    const int64_t n0 = bx * tile_n, n1 = std::min(N, n0 + tile_n);
    const int64_t m0 = by * tile_m, m1 = std::min(M, m0 + tile_m);
    if (n0 >= n1 || m0 >= m1) continue;
    const WeightView part{d.w.data() + n0 * K * static_cast<int64_t>(DTypeSize(d.dtype)), d.dtype,
                          n1 - n0, K};
    std::vector<float> out(static_cast<size_t>((m1 - m0) * (n1 - n0)));
    MatMul(Reference(), d.x + m0 * K, m1 - m0, part, bias ? bias + n0 : nullptr, out.data());
    for (int64_t m = m0; m < m1; ++m) {
      std::memcpy(&expected[m * N + n0], &out[(m - m0) * (n1 - n0)], (n1 - n0) * sizeof(float));
    }
  }
  std::vector<char> ran(static_cast<size_t>(dims.grid_x) * dims.grid_y, 0);
  for (const auto& [bx, by] : blocks) ran[static_cast<size_t>(by) * dims.grid_x + bx] = 1;
  return CompareWritten(expected, y, N, [&](int64_t m, int64_t n) {
    return ran[static_cast<size_t>(m / tile_m) * dims.grid_x + static_cast<size_t>(n / tile_n)] !=
           0;
  });
}

const MatMulKernel kAllMatMulKernels[] = {MatMulKernel::kGemv, MatMulKernel::kGemm128x128,
                                          MatMulKernel::kGemm64x64, MatMulKernel::kGemm64x32};

std::string Describe(DType dtype, const shapes::MatMulShape& s, MatMulKernel k) {
  return std::string(DTypeName(dtype)) + " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) +
         " K=" + std::to_string(s.K) + " " + KernelName(k);
}

MatMulKernel H200Kernel(int64_t M, int64_t N) {
  if (M <= 8) return MatMulKernel::kGemv;
  switch (sc::ChooseGemmTile(M, N, shapes::kH200SmCount)) {
    case sc::GemmTileKind::k128x128:
      return MatMulKernel::kGemm128x128;
    case sc::GemmTileKind::k64x64:
      return MatMulKernel::kGemm64x64;
    case sc::GemmTileKind::k64x32:
      return MatMulKernel::kGemm64x32;
  }
  return MatMulKernel::kGemv;
}

// Every shape of the GPU test in every dtype (bf16 only above the size limit, as there),
// through the GEMV and through the GEMM tile an H200 takes for it: the GPU test runs the
// dispatch, the GEMV and the GEMM for each shape (its shapes reach all three tiles).
TEST(CudaSchedule, MatMulKernelsEqualReferenceOnGpuTestShapes) {
  int64_t ran = 0, total = 0;
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (const auto& s : shapes::kMatMul) {
      if (s.M * s.N * s.K > shapes::kMatMulAllDTypesLimit && dtype != DType::kBF16) continue;
      const MatMulData d = MakeMatMul(dtype, s, false, 0);
      for (MatMulKernel k : {MatMulKernel::kGemv, H200Kernel(std::max<int64_t>(9, s.M), s.N)}) {
        std::pair<int64_t, int64_t> blocks;
        const std::string diff = SimulateMatMul(k, d, s.M, &blocks);
        ran += blocks.first;
        total += blocks.second;
        ASSERT_EQ(diff, "") << Describe(dtype, s, k);
      }
    }
  }
  std::printf("simulated %lld of %lld blocks\n", static_cast<long long>(ran),
              static_cast<long long>(total));
}

// Every GEMM tile (another GPU may choose another one) on shapes that fit one tile or two.
TEST(CudaSchedule, EveryGemmTileEqualsReference) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (const shapes::MatMulShape& s :
         {shapes::MatMulShape{9, 77, 1025}, shapes::MatMulShape{33, 65, 896}}) {
      const MatMulData d = MakeMatMul(dtype, s, false, 0);
      for (MatMulKernel k : kAllMatMulKernels)
        ASSERT_EQ(SimulateMatMul(k, d, s.M), "") << Describe(dtype, s, k);
    }
  }
}

TEST(CudaSchedule, MatMulWithBiasAndMisalignedActivations) {
  for (const auto& s : shapes::kMatMulBiasMisaligned) {
    for (int64_t offset : {0, 1}) {
      const MatMulData d = MakeMatMul(DType::kBF16, s, true, offset);
      for (MatMulKernel k : kAllMatMulKernels) {
        ASSERT_EQ(SimulateMatMul(k, d, s.M), "")
            << Describe(DType::kBF16, s, k) << " +bias offset " << offset;
      }
    }
  }
}

// ---- the launches of the whole-model GPU tests at the real widths ------------------------

struct LayerShape {
  const char* name;
  int64_t N, K;
  bool bias;
};

std::vector<LayerShape> PresetMatMuls(const engine::ModelConfig& c) {
  const int64_t qd = c.num_heads * c.head_dim, kvd = c.num_kv_heads * c.head_dim;
  return {{"q_proj", qd, c.hidden_size, c.attention_bias},
          {"k_proj", kvd, c.hidden_size, c.attention_bias},
          {"o_proj", c.hidden_size, qd, false},
          {"gate_proj", c.intermediate_size, c.hidden_size, false},
          {"down_proj", c.hidden_size, c.intermediate_size, false},
          {"lm_head", c.vocab_size, c.hidden_size, false}};
}

TEST(CudaSchedule, MatMulsOfTheRealPresetsAtTheTestedBatchSizes) {
  // Decode at batch 1, 2, 7 and the GEMV's widest pass (8); prefill / mixed passes of 9, 64
  // and 300 rows, each through the kernel an H200 runs for it (the kernel-shape test above
  // covers every tile at every shape).
  for (const char* preset : shapes::kEnginePresets) {
    auto config = engine::PresetConfig(preset);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    for (const LayerShape& l : PresetMatMuls(*config)) {
      const MatMulData d = MakeMatMul(DType::kBF16, {300, l.N, l.K}, l.bias, 0);
      for (int64_t M : {1, 2, 7, 8, 9, 64, 300}) {
        // The LM head only sees the rows whose logits were asked for (under a hundred here).
        if (std::string(l.name) == "lm_head" && M > 64) continue;
        const MatMulKernel k = H200Kernel(M, l.N);
        ASSERT_EQ(SimulateMatMul(k, d, M), "")
            << preset << " " << l.name << " " << Describe(DType::kBF16, {M, l.N, l.K}, k);
      }
    }
  }
}

TEST(CudaSchedule, GemmTileChoiceOnAnH200) {
  // The tile only moves work between threads; but each choice must be one the test runs.
  EXPECT_EQ(sc::ChooseGemmTile(1100, 2100, shapes::kH200SmCount), sc::GemmTileKind::k128x128);
  EXPECT_EQ(sc::ChooseGemmTile(600, 1100, shapes::kH200SmCount), sc::GemmTileKind::k64x64);
  EXPECT_EQ(sc::ChooseGemmTile(9, 77, shapes::kH200SmCount), sc::GemmTileKind::k64x32);
}

// ---- RmsNorm ----------------------------------------------------------------------------------

template <DType D>
std::string SimulateRmsNorm(int64_t M, int64_t n, bool in_place, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto x = testing::RandomVector(rng, M * n, 3.0f);
  const auto w = testing::RandomWeights(rng, D, 1, n, 0.2f);
  std::vector<float> expected(x.size());
  RmsNorm(Reference(), x.data(), M, n, w.view(), 1e-6f, expected.data());
  std::vector<float> buffer = in_place ? x : std::vector<float>(x.size(), Unwritten());
  const sc::RmsNormArgs args{
      in_place ? buffer.data() : x.data(), M, n, w.bytes.data(), 1e-6f, buffer.data()};
  const sc::LaunchDims dims = sc::RmsNormLaunch(M);
  sc::SimulateGrid(dims, [&](sc::HostBlock& block, uint32_t bx, uint32_t) {
    sc::RmsNormBlock<D>(block, bx, args);
  });
  return CompareWritten(expected, buffer, n, [](int64_t, int64_t) { return true; });
}

TEST(CudaSchedule, RmsNormEqualsReference) {
  for (int64_t n : shapes::kRmsNormLengths) {
    for (int64_t M : shapes::kRmsNormRows) {
      for (bool in_place : {false, true}) {
        const uint64_t seed = static_cast<uint64_t>(n * 7 + M);
        ASSERT_EQ((SimulateRmsNorm<DType::kBF16>(M, n, in_place, seed)), "") << n << " " << M;
        ASSERT_EQ((SimulateRmsNorm<DType::kF16>(M, n, in_place, seed)), "") << n << " " << M;
        ASSERT_EQ((SimulateRmsNorm<DType::kF32>(M, n, in_place, seed)), "") << n << " " << M;
      }
    }
  }
  // The engine's norms at the real widths: hidden rows, and the Qwen3 q/k norm (one row per
  // head, in place).
  for (const char* preset : shapes::kEnginePresets) {
    auto c = engine::PresetConfig(preset);
    ASSERT_TRUE(c.ok());
    for (int64_t rows : {1, 7, 64}) {
      ASSERT_EQ((SimulateRmsNorm<DType::kBF16>(rows, c->hidden_size, false, 1)), "") << preset;
      ASSERT_EQ((SimulateRmsNorm<DType::kBF16>(rows * c->num_heads, c->head_dim, true, 2)), "")
          << preset;
    }
  }
}

// ---- attention ------------------------------------------------------------------------------

// Rows r = 0..: query row r at positions[r] against one cache (batched, as AttentionRows),
// with a sliding window (0: none) and the scale of `scale_dim` (0: head_dim). The reference is
// the CPU kernel over the window's rows, as kernels::Attention's contract says.
std::string SimulateAttention(const shapes::AttentionShape& a,
                              const std::vector<int64_t>& positions, int64_t max_pos, bool batched,
                              uint64_t seed, int64_t window = 0, int64_t scale_dim = 0) {
  const float scale = canonical::AttentionScale(scale_dim > 0 ? scale_dim : a.head_dim);
  std::mt19937_64 rng(seed);
  const int64_t kv_stride = a.kv_heads * a.head_dim;
  const auto k = testing::RandomVector(rng, max_pos * kv_stride);
  const auto v = testing::RandomVector(rng, max_pos * kv_stride);
  const int64_t rows = static_cast<int64_t>(positions.size());
  const int64_t row_len = a.heads * a.head_dim;
  const auto q = testing::RandomVector(rng, rows * row_len, 3.0f);
  std::vector<float> expected(q.size());
  std::vector<float> scratch(static_cast<size_t>(2 * max_pos));
  KernelContext ref;
  ref.impl = Impl::kReference;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t first = window > 0 && positions[r] >= window ? positions[r] - window + 1 : 0;
    Attention(ref, q.data() + r * row_len, k.data() + first * kv_stride,
              v.data() + first * kv_stride, positions[r] - first, a.heads, a.kv_heads, a.head_dim,
              scale, scratch.data(), expected.data() + r * row_len);
  }
  std::vector<float> out(q.size(), Unwritten());
  std::vector<float> device_scratch(static_cast<size_t>(rows * a.heads * max_pos));
  std::vector<const float*> k_rows(static_cast<size_t>(rows), k.data());
  std::vector<const float*> v_rows(static_cast<size_t>(rows), v.data());
  std::vector<int32_t> pos32(positions.begin(), positions.end());
  for (int64_t r0 = 0; r0 < rows; r0 += batched ? rows : 1) {
    sc::AttentionArgs args;
    args.heads = a.heads;
    args.kv_heads = a.kv_heads;
    args.head_dim = a.head_dim;
    args.scale = scale;
    args.window = window;
    args.scratch = device_scratch.data();
    if (batched) {
      args.q = q.data();
      args.k_caches = k_rows.data();
      args.v_caches = v_rows.data();
      args.positions = pos32.data();
      args.scratch_stride = max_pos;
      args.out = out.data();
    } else {  // the single-row entry point
      args.q = q.data() + r0 * row_len;
      args.k0 = k.data();
      args.v0 = v.data();
      args.pos0 = positions[r0];
      args.scratch_stride = positions[r0] + 1;
      args.out = out.data() + r0 * row_len;
    }
    const sc::LaunchDims dims = sc::AttentionLaunch(batched ? rows : 1, a.heads, a.head_dim);
    sc::SimulateGrid(dims, [&](sc::HostBlock& block, uint32_t bx, uint32_t by) {
      std::vector<float> shared(static_cast<size_t>(sc::AttentionSharedFloats(a.head_dim)));
      sc::AttentionBlock(block, bx, by, args, shared.data());
    });
  }
  return CompareWritten(expected, out, row_len, [](int64_t, int64_t) { return true; });
}

TEST(CudaSchedule, AttentionEqualsReference) {
  const std::vector<int64_t> positions(std::begin(shapes::kAttentionPositions),
                                       std::end(shapes::kAttentionPositions));
  for (const auto& a : shapes::kAttention) {
    for (bool batched : {true, false}) {
      ASSERT_EQ(SimulateAttention(a, positions, shapes::kAttentionMaxPos, batched, 11), "")
          << a.heads << "/" << a.kv_heads << " d=" << a.head_dim << (batched ? " rows" : " single");
    }
  }
  for (const char* preset : shapes::kEnginePresets) {
    auto c = engine::PresetConfig(preset);
    ASSERT_TRUE(c.ok());
    const shapes::AttentionShape a{c->num_heads, c->num_kv_heads, c->head_dim};
    ASSERT_EQ(SimulateAttention(a, {0, 5, 11, 12, 40, 63, 64, 100}, 128, true, 12), "") << preset;
  }
}

// Gemma 3's attention: a sliding window (positions before, at and past it) and
// query_pre_attn_scalar's scale, at gemma-3-1b's shape (4 heads over 1 KV head of 256) and the
// tiny one's.
TEST(CudaSchedule, SlidingWindowAttentionEqualsReference) {
  const std::vector<int64_t> positions = {0, 3, 7, 8, 9, 30, 63, 100};
  for (const shapes::AttentionShape& a :
       {shapes::AttentionShape{4, 1, 256}, shapes::AttentionShape{4, 2, 16}}) {
    for (bool batched : {true, false}) {
      ASSERT_EQ(SimulateAttention(a, positions, 128, batched, 13, /*window=*/8, /*scale_dim=*/24),
                "")
          << a.heads << "/" << a.kv_heads << " d=" << a.head_dim << (batched ? " rows" : " single");
    }
  }
}

// ---- elementwise ops and row moves ----------------------------------------------------------

TEST(CudaSchedule, ElementwiseKernelsEqualReference) {
  for (int64_t n : shapes::kElementwiseLengths) {
    std::mt19937_64 rng(static_cast<uint64_t>(n));
    const auto gate = testing::RandomVector(rng, n, 8.0f);
    const auto up = testing::RandomVector(rng, n, 1.0f);
    std::vector<float> expected(gate.size());
    const sc::LaunchDims dims = sc::ElementwiseLaunch(n);
    std::vector<float> out(gate.size(), Unwritten());
    const sc::BinaryArgs args{gate.data(), up.data(), n, out.data()};

    SiluMul(Reference(), gate.data(), up.data(), n, expected.data());
    sc::SimulateGrid(
        dims, [&](sc::HostBlock& b, uint32_t bx, uint32_t) { sc::SiluMulBlock(b, bx, args); });
    ASSERT_EQ(CompareWritten(expected, out, n, [](int64_t, int64_t) { return true; }), "") << n;

    GeluTanhMul(Reference(), gate.data(), up.data(), n, expected.data());
    sc::SimulateGrid(
        dims, [&](sc::HostBlock& b, uint32_t bx, uint32_t) { sc::GeluTanhMulBlock(b, bx, args); });
    ASSERT_EQ(CompareWritten(expected, out, n, [](int64_t, int64_t) { return true; }), "") << n;

    Add(Reference(), gate.data(), up.data(), n, expected.data());
    sc::SimulateGrid(dims,
                     [&](sc::HostBlock& b, uint32_t bx, uint32_t) { sc::AddBlock(b, bx, args); });
    ASSERT_EQ(CompareWritten(expected, out, n, [](int64_t, int64_t) { return true; }), "") << n;
  }
  // Exp: a sample of the GPU test's sweep over [-110, 110] and the special values.
  const std::vector<float> x = shapes::ExpInputs(9973);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> expected(x.size()), out(x.size(), Unwritten());
  ExpArray(Reference(), x.data(), n, expected.data());
  const sc::BinaryArgs args{x.data(), nullptr, n, out.data()};
  sc::SimulateGrid(sc::ElementwiseLaunch(n),
                   [&](sc::HostBlock& b, uint32_t bx, uint32_t) { sc::ExpBlock(b, bx, args); });
  ASSERT_EQ(CompareWritten(expected, out, n, [](int64_t, int64_t) { return true; }), "");
}

TEST(CudaSchedule, RopeEqualsReference) {
  for (int64_t head_dim : shapes::kRopeHeadDims) {
    const int64_t half = head_dim / 2;
    std::vector<float> cos_t(static_cast<size_t>(shapes::kRopeMaxPos * half)), sin_t(cos_t.size());
    MakeRopeTables(shapes::kRopeMaxPos, head_dim, 1000000.0, cos_t.data(), sin_t.data());
    std::mt19937_64 rng(3);
    std::vector<int32_t> positions(static_cast<size_t>(shapes::kRopeRows));
    for (auto& p : positions) p = static_cast<int32_t>(rng() % shapes::kRopeMaxPos);
    const auto x =
        testing::RandomVector(rng, shapes::kRopeRows * shapes::kRopeHeads * head_dim, 2.0f);
    std::vector<float> expected = x, got = x;
    Rope(Reference(), expected.data(), shapes::kRopeRows, shapes::kRopeHeads, head_dim,
         positions.data(), cos_t.data(), sin_t.data());
    const sc::RopeArgs args{got.data(),       shapes::kRopeRows, shapes::kRopeHeads, head_dim,
                            positions.data(), cos_t.data(),      sin_t.data()};
    sc::SimulateGrid(sc::ElementwiseLaunch(sc::RopePairs(args)),
                     [&](sc::HostBlock& b, uint32_t bx, uint32_t) { sc::RopeBlock(b, bx, args); });
    ASSERT_EQ(CompareWritten(expected, got, head_dim, [](int64_t, int64_t) { return true; }), "")
        << head_dim;
  }
}

template <DType D>
std::string SimulateEmbedding(float scale = 1.0f) {
  std::mt19937_64 rng(5);
  const auto table =
      testing::RandomWeights(rng, D, shapes::kEmbeddingVocab, shapes::kEmbeddingCols, 1.0f);
  const std::vector<int32_t> ids(std::begin(shapes::kEmbeddingIds),
                                 std::end(shapes::kEmbeddingIds));
  const int64_t M = static_cast<int64_t>(ids.size());
  std::vector<float> expected(static_cast<size_t>(M * shapes::kEmbeddingCols));
  Embedding(Reference(), table.view(), ids.data(), M, expected.data(), scale);
  std::vector<float> out(expected.size(), Unwritten());
  const sc::EmbeddingArgs args{
      table.bytes.data(), shapes::kEmbeddingCols, ids.data(), M, out.data(), scale};
  sc::SimulateGrid(
      sc::EmbeddingLaunch(M, shapes::kEmbeddingCols),
      [&](sc::HostBlock& b, uint32_t bx, uint32_t by) { sc::EmbeddingBlock<D>(b, bx, by, args); });
  return CompareWritten(expected, out, shapes::kEmbeddingCols,
                        [](int64_t, int64_t) { return true; });
}

TEST(CudaSchedule, EmbeddingAndRowMovesCopyExactly) {
  ASSERT_EQ(SimulateEmbedding<DType::kBF16>(), "");
  ASSERT_EQ(SimulateEmbedding<DType::kF16>(), "");
  ASSERT_EQ(SimulateEmbedding<DType::kF32>(), "");
  ASSERT_EQ(SimulateEmbedding<DType::kBF16>(34.0f), "") << "Gemma's scale";
  // The engine's K/V append (scatter) and output-row gather, at a real KV width.
  const int64_t width = 1024, rows = 5, capacity = 40;
  std::mt19937_64 rng(6);
  const auto src = testing::RandomVector(rng, rows * width);
  std::vector<std::vector<float>> caches(rows, std::vector<float>(capacity * width, Unwritten()));
  std::vector<float*> dst(rows);
  for (int64_t r = 0; r < rows; ++r) dst[r] = caches[r].data();
  const std::vector<int32_t> positions = {0, 39, 7, 7, 12};
  const sc::LaunchDims dims = sc::RowMoveLaunch(rows, width);
  const sc::ScatterRowsArgs scatter{src.data(), width, dst.data(), positions.data()};
  sc::SimulateGrid(dims, [&](sc::HostBlock& b, uint32_t bx, uint32_t by) {
    sc::ScatterRowsBlock(b, bx, by, dims.grid_x, scatter);
  });
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < capacity; ++p) {
      for (int64_t i = 0; i < width; ++i) {
        const float got = caches[r][p * width + i];
        const bool mine = p == positions[r];
        ASSERT_EQ(Bits(got), mine ? Bits(src[r * width + i]) : kUnwritten)
            << r << " " << p << " " << i;
      }
    }
  }
  const std::vector<int32_t> index = {4, 0, 2};
  std::vector<float> gathered(index.size() * width, Unwritten());
  const sc::LaunchDims gdims = sc::RowMoveLaunch(static_cast<int64_t>(index.size()), width);
  const sc::GatherRowsArgs gather{src.data(), index.data(), width, gathered.data()};
  sc::SimulateGrid(gdims, [&](sc::HostBlock& b, uint32_t bx, uint32_t by) {
    sc::GatherRowsBlock(b, bx, by, gdims.grid_x, gather);
  });
  for (size_t i = 0; i < index.size(); ++i) {
    ASSERT_EQ(std::memcmp(gathered.data() + i * width, src.data() + index[i] * width, width * 4),
              0);
  }
}

// ---- the race check of the host block (host_block.h) -----------------------------------------

// Runs `body` over one block of `threads` threads; the race message, or "" for none.
template <class Body>
std::string RaceOf(int threads, Body&& body) {
  sc::LaunchDims dims;
  dims.block = threads;
  try {
    sc::SimulateGrid(dims, [&](sc::HostBlock& b, uint32_t, uint32_t) { body(b); });
  } catch (const sc::RaceError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaRaceCheck, AReadOfAnotherThreadsWriteNeedsABarrierBetween) {
  std::vector<float> memory(64);
  auto neighbour = [&](bool barrier) {
    float sink = 0.0f;
    return RaceOf(64, [&](sc::HostBlock& b) {
      auto buf = b.Shared(memory.data(), 64, "toy.buf");
      b.ForEachThread([&](int tid) { buf[tid] = static_cast<float>(tid); });
      if (barrier) b.Barrier();
      b.ForEachThread([&](int tid) { sink += buf[(tid + 1) % 64]; });
    });
  };
  EXPECT_EQ(neighbour(true), "");
  const std::string race = neighbour(false);
  EXPECT_NE(race.find("toy.buf["), std::string::npos) << race;
  EXPECT_NE(race.find("read what thread"), std::string::npos) << race;
  EXPECT_NE(race.find("block (0, 0)"), std::string::npos) << race;
}

TEST(CudaRaceCheck, AWriteOfWhatOthersReadInTheSameIntervalIsARace) {
  // The pattern the attention body had: every thread reads element 0, thread 0 rewrites it.
  std::vector<float> memory(32, 1.0f);
  const std::string race = RaceOf(32, [&](sc::HostBlock& b) {
    auto p = b.Shared(memory.data(), 32, "toy.scores");
    b.ForEachThread([&](int tid) {
      const float first = p[0];
      p[tid] = first + 1.0f;
    });
  });
  EXPECT_NE(race.find("toy.scores[0]"), std::string::npos) << race;
  EXPECT_NE(race.find("wrote what"), std::string::npos) << race;
  // Each thread reading and rewriting only its own element is no race.
  EXPECT_EQ(RaceOf(32,
                   [&](sc::HostBlock& b) {
                     auto p = b.Shared(memory.data(), 32, "toy.scores");
                     b.ForEachThread([&](int tid) { p[tid] = p[tid] + 1.0f; });
                   }),
            "");
}

TEST(CudaRaceCheck, ALocalOfAnotherThreadIsReadOnlyThroughWarpGather) {
  const std::string race = RaceOf(64, [&](sc::HostBlock& b) {
    sc::HostBlock::Local<float> v(b);
    b.ForEachThread([&](int tid) { v[tid] = static_cast<float>(tid); });
    b.ForEachThread([&](int tid) {
      float lanes[canonical::kLanes];
      b.WarpGather(
          tid, [&](int t) { return v[t]; }, lanes);  // allowed
      v[tid] = lanes[0] + v[tid ^ 1];                // another thread's register
    });
  });
  EXPECT_NE(race.find("Local value outside WarpGather"), std::string::npos) << race;
}

TEST(CudaRaceCheck, AnIndexOutsideASharedBufferIsCaught) {
  std::vector<float> memory(16);
  const std::string race = RaceOf(16, [&](sc::HostBlock& b) {
    auto buf = b.Shared(memory.data(), 15, "toy.short");
    b.ForEachThread([&](int tid) { buf[tid] = 0.0f; });
  });
  EXPECT_NE(race.find("toy.short[15] is outside the buffer of 15"), std::string::npos) << race;
}

TEST(CudaRaceCheck, ThreadsOfAPhaseRunInAShuffledFixedOrder) {
  auto order = [](uint64_t seed) {
    sc::HostBlock b(256, seed);
    std::vector<int> seen;
    b.ForEachThread([&](int tid) { seen.push_back(tid); });
    return seen;
  };
  const std::vector<int> a = order(7);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int t = 0; t < 256; ++t) ASSERT_EQ(sorted[static_cast<size_t>(t)], t);
  EXPECT_NE(a, sorted);    // not in thread order
  EXPECT_EQ(a, order(7));  // the same every run
  EXPECT_NE(a, order(8));  // another block, another order
}

}  // namespace
}  // namespace trace::kernels
