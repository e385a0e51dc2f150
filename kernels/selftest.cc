// The canonical-v2 self-test cases and their pinned digests (kernels/selftest.h).
//
// The digests were computed by the scalar references before kernels/canonical.h existed and
// must never change while kNumericsVersion is "canonical-v2": a change here is a change of
// the contract (bump the version and re-pin), never a fix.
#include "kernels/selftest.h"
#include "kernels/canonical.h"

#include <cmath>
#include <cstring>

#include "base/splitmix64.h"

namespace trace::kernels {
namespace {

// The inputs' generator: SplitMix64 (base/splitmix64.h), the same numbers on every machine.
struct Generator : SplitMix64 {
  using SplitMix64::SplitMix64;
  // A float in [-scale, scale) with 24 random bits: exact on every machine.
  float Uniform(float scale) {
    const int32_t r = static_cast<int32_t>(Next() >> 40) - (1 << 23);  // [-2^23, 2^23)
    return static_cast<float>(r) * 0x1p-23f * scale;
  }
  std::vector<float> Vector(int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = Uniform(scale);
    return v;
  }
};

std::vector<uint8_t> Weights(Generator* g, DType dtype, int64_t n, float scale) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * DTypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float v = g->Uniform(scale);
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h =
          dtype == DType::kBF16 ? F32ToBf16RoundNearestEven(v) : F32ToF16RoundNearestEven(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

// The pinned canonical-v2 digests, by case name.
const struct {
  const char* name;
  uint64_t digest;
} kPinned[] = {
    {"exp", 0x68d67c770eaf1b4eull},
    {"matmul.bf16.m3", 0x36c0cb3d63cc271dull},
    {"matmul.f16.m3.bias", 0x41af53842a007d31ull},
    {"matmul.f32.m3", 0xd654c411f927240eull},
    {"matmul.bf16.m40.bias", 0x69e1c9784bea3fe1ull},
    {"rms_norm.bf16", 0xab9e04be40bc12c5ull},
    {"embedding.f16", 0x76cfb95682ae3031ull},
    {"rope", 0x21bb44ba58d37e1aull},
    {"silu_mul", 0xe0f1d9803cf2a1dcull},
    {"add", 0xab2e5d82e1b2eb4bull},
    {"attention.pos70", 0x3e2f754fd0b59816ull},
    {"attention.pos1100", 0x627a8559f1e35904ull},
};

SelfTestCase MatMulCase(const char* name, DType dtype, int64_t M, int64_t N, int64_t K, bool bias,
                        uint64_t seed) {
  Generator g{seed};
  SelfTestCase c;
  c.name = name;
  c.op = SelfTestCase::Op::kMatMul;
  c.M = M;
  c.N = N;
  c.K = K;
  c.dtype = dtype;
  c.a = g.Vector(M * K, 1.0f);
  c.weights = Weights(&g, dtype, N * K, 0.05f);
  if (bias) c.bias = g.Vector(N, 0.5f);
  return c;
}

}  // namespace

WeightView SelfTestCase::weight_view() const {
  return WeightView{weights.data(), dtype, N, K, WeightLayout::kRowMajor};
}

int64_t SelfTestCase::output_size() const {
  switch (op) {
    case Op::kMatMul:
      return M * N;
    case Op::kRmsNorm:
    case Op::kEmbedding:
      return M * K;
    case Op::kRope:
      return M * heads * head_dim;
    case Op::kAttention:
      return heads * head_dim;
    case Op::kExp:
    case Op::kSiluMul:
    case Op::kAdd:
      return K;
  }
  return 0;
}

uint64_t SelfTestDigest(const float* v, int64_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (bits >> (8 * byte)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

std::vector<SelfTestCase> SelfTestCases() {
  std::vector<SelfTestCase> cases;
  {
    // Exp: a sweep over [-110, 110] (both special-case borders) plus the special values.
    SelfTestCase c;
    c.name = "exp";
    c.op = SelfTestCase::Op::kExp;
    for (int i = 0; i < 22001; ++i) c.a.push_back(-110.0f + 0.01f * static_cast<float>(i));
    for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 88.72283f, 88.72284f, -103.97f, -104.0f, -104.01f,
                    1e-30f, -1e-30f, INFINITY, -INFINITY}) {
      c.a.push_back(v);
    }
    c.K = static_cast<int64_t>(c.a.size());
    cases.push_back(std::move(c));
  }
  // MatMul: K = 1100 wraps the lanes (block 32 returns to lane 0) and ends in a short block;
  // M = 3 runs the decode paths (GEMV on CUDA), M = 40 the prefill paths (GEMM).
  cases.push_back(MatMulCase("matmul.bf16.m3", DType::kBF16, 3, 70, 1100, false, 11));
  cases.push_back(MatMulCase("matmul.f16.m3.bias", DType::kF16, 3, 70, 1100, true, 12));
  cases.push_back(MatMulCase("matmul.f32.m3", DType::kF32, 3, 70, 1100, false, 13));
  cases.push_back(MatMulCase("matmul.bf16.m40.bias", DType::kBF16, 40, 70, 1100, true, 14));
  {
    Generator g{21};
    SelfTestCase c;
    c.name = "rms_norm.bf16";
    c.op = SelfTestCase::Op::kRmsNorm;
    c.M = 5;
    c.N = 1;
    c.K = 1100;
    c.dtype = DType::kBF16;
    c.a = g.Vector(c.M * c.K, 2.0f);
    c.weights = Weights(&g, DType::kBF16, c.K, 1.5f);
    c.eps = 1e-6f;
    cases.push_back(std::move(c));
  }
  {
    Generator g{22};
    SelfTestCase c;
    c.name = "embedding.f16";
    c.op = SelfTestCase::Op::kEmbedding;
    c.M = 4;
    c.N = 50;
    c.K = 40;
    c.dtype = DType::kF16;
    c.weights = Weights(&g, DType::kF16, c.N * c.K, 3.0f);
    c.ids = {0, 49, 7, 7};
    cases.push_back(std::move(c));
  }
  {
    Generator g{23};
    SelfTestCase c;
    c.name = "rope";
    c.op = SelfTestCase::Op::kRope;
    c.M = 4;
    c.heads = 3;
    c.head_dim = 64;
    c.a = g.Vector(c.M * c.heads * c.head_dim, 4.0f);
    c.ids = {0, 5, 100, 1000};
    c.cos_table.resize(1024 * 32);
    c.sin_table.resize(1024 * 32);
    MakeRopeTables(1024, 64, 1000000.0, c.cos_table.data(), c.sin_table.data());
    cases.push_back(std::move(c));
  }
  {
    Generator g{24};
    SelfTestCase c;
    c.name = "silu_mul";
    c.op = SelfTestCase::Op::kSiluMul;
    c.K = 5000;
    c.a = g.Vector(c.K, 100.0f);  // gate: both Exp borders
    c.b = g.Vector(c.K, 2.0f);
    cases.push_back(std::move(c));
  }
  {
    Generator g{25};
    SelfTestCase c;
    c.name = "add";
    c.op = SelfTestCase::Op::kAdd;
    c.K = 1000;
    c.a = g.Vector(c.K, 1.0f);
    c.b = g.Vector(c.K, 1e-4f);
    cases.push_back(std::move(c));
  }
  for (int64_t pos : {70, 1100}) {  // 1100: the position blocks wrap the lanes
    Generator g{static_cast<uint64_t>(30 + pos)};
    SelfTestCase c;
    c.name = "attention.pos" + std::to_string(pos);
    c.op = SelfTestCase::Op::kAttention;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 64;
    c.pos = pos;
    c.a = g.Vector(c.heads * c.head_dim, 1.0f);
    c.b = g.Vector((pos + 1) * c.kv_heads * c.head_dim, 1.0f);
    c.c = g.Vector((pos + 1) * c.kv_heads * c.head_dim, 1.0f);
    cases.push_back(std::move(c));
  }
  for (SelfTestCase& c : cases) {
    for (const auto& p : kPinned) {
      if (c.name == p.name) c.pinned = p.digest;
    }
  }
  return cases;
}

std::vector<SelfTestResult> RunCpuSelfTest(const KernelContext& ctx) {
  std::vector<SelfTestResult> results;
  for (const SelfTestCase& c : SelfTestCases()) {
    std::vector<float> out(static_cast<size_t>(c.output_size()));
    switch (c.op) {
      case SelfTestCase::Op::kExp:
        ExpArray(ctx, c.a.data(), c.K, out.data());
        break;
      case SelfTestCase::Op::kMatMul:
        MatMul(ctx, c.a.data(), c.M, c.weight_view(), c.bias.empty() ? nullptr : c.bias.data(),
               out.data());
        break;
      case SelfTestCase::Op::kRmsNorm:
        RmsNorm(ctx, c.a.data(), c.M, c.K, WeightView{c.weights.data(), c.dtype, 1, c.K}, c.eps,
                out.data());
        break;
      case SelfTestCase::Op::kEmbedding:
        Embedding(ctx, c.weight_view(), c.ids.data(), c.M, out.data());
        break;
      case SelfTestCase::Op::kRope:
        out = c.a;
        Rope(ctx, out.data(), c.M, c.heads, c.head_dim, c.ids.data(), c.cos_table.data(),
             c.sin_table.data());
        break;
      case SelfTestCase::Op::kSiluMul:
        SiluMul(ctx, c.a.data(), c.b.data(), c.K, out.data());
        break;
      case SelfTestCase::Op::kAdd:
        Add(ctx, c.a.data(), c.b.data(), c.K, out.data());
        break;
      case SelfTestCase::Op::kAttention: {
        std::vector<float> scratch(static_cast<size_t>(2 * (c.pos + 1)));
        Attention(ctx, c.a.data(), c.b.data(), c.c.data(), c.pos, c.heads, c.kv_heads, c.head_dim,
                  canonical::AttentionScale(c.head_dim), scratch.data(), out.data());
        break;
      }
    }
    results.push_back({c.name, SelfTestDigest(out.data(), c.output_size()), c.pinned});
  }
  return results;
}

}  // namespace trace::kernels
