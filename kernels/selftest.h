// The numerics self-test of canonical-v2: fixed, seeded inputs through every canonical op,
// each output reduced to a 64-bit digest and compared with the digest pinned when the
// contract was written. Any backend that claims the contract (the scalar reference, AVX2,
// AVX-512, CUDA) must reproduce every pinned digest; `trace doctor` runs it on every ISA path
// and device present, and tests run it in CI.
//
// Ownership: the inputs are values owned by the caller. Thread safety: reentrant.
// Errors: none here; a backend that cannot run reports through its own Result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace trace::kernels {

// One case's inputs (host memory; f32 unless the weight view says otherwise).
struct SelfTestCase {
  enum class Op { kExp, kMatMul, kRmsNorm, kEmbedding, kRope, kSiluMul, kAdd, kAttention };
  std::string name;  // "matmul.bf16.m3", ...
  Op op = Op::kExp;
  // Shapes: MatMul M x K against N x K; RmsNorm M x n (K = n); Embedding M ids into N x K;
  // Rope M rows x heads x head_dim; SiluMul/Add/Exp n = K; Attention one query at `pos`.
  int64_t M = 0, N = 0, K = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, pos = 0;
  DType dtype = DType::kF32;                // of `weights`
  std::vector<float> a, b, c;               // x / gate / q ; up / k cache ; v cache
  std::vector<uint8_t> weights;             // MatMul / RmsNorm / Embedding weights in `dtype`
  std::vector<float> bias;                  // MatMul bias (empty: none)
  std::vector<int32_t> ids;                 // Embedding ids / Rope positions
  std::vector<float> cos_table, sin_table;  // Rope
  float eps = 0.0f;                         // RmsNorm
  uint64_t pinned = 0;                      // the canonical-v2 digest of the output
  WeightView weight_view() const;           // over `weights` (row-major)
  int64_t output_size() const;              // floats of the output
};

// The cases, built the same way on every machine (own integer generator, exact values).
std::vector<SelfTestCase> SelfTestCases();

// FNV-1a 64 over the bits of `n` floats: the digest of one output.
uint64_t SelfTestDigest(const float* v, int64_t n);

struct SelfTestResult {
  std::string name;
  uint64_t digest = 0;
  uint64_t pinned = 0;
  bool ok() const { return digest == pinned; }
};

// Runs every case through the CPU kernels with `ctx` (numerics must be canonical).
std::vector<SelfTestResult> RunCpuSelfTest(const KernelContext& ctx);

}  // namespace trace::kernels
