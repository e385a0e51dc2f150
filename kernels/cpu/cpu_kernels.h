// Internal to trace_kernels: the per-ISA CPU implementations behind kernels/kernels.h.
// ref::  plain scalar references that read like docs/numerics.md (canonical-v2).
// avx2:: AVX2+FMA paths (kernels/cpu/avx2_*.cc, built with -mavx2 -mfma -mf16c); call
//        them only when HaveAvx2() is true. Canonical ones equal ref:: bit for bit.
// avx512:: AVX-512 paths (kernels/cpu/avx512_*.cc, built with -mavx512f/bw/dq/vl); call
//        them only when HaveAvx512() is true. Equal to ref:: bit for bit.
// neon:: AArch64 Advanced SIMD paths (kernels/cpu/neon_*.cc, built only for aarch64), canonical
//        only. Equal to ref:: bit for bit.
// Ranges [begin, end) are output columns (MatMul) or heads (Attention): the dispatch in
// kernels/kernels.cc splits them over the thread pool; each output is computed whole.
//
// Ownership: caller-owned pointers only. Thread safety: reentrant; temporary buffers are
// thread-local. Errors: none (shapes are the caller's contract).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::kernels {

// Block b of row n of a ggml block matrix of 32 (IsQuantized): its f16 scale, for Q4_1 / Q5_1
// its f16 min, and its 32 values as int8: Q8_0's bytes; Q4_0 nibble - 8, Q5_0 (nibble | fifth
// bit << 4) - 16 (symmetric: weight Q8_0Weight(scale, q)); Q4_1 nibble, Q5_1 nibble | fifth
// bit << 4 (affine: AffineBlockWeight(scale, min, q)). Nibbles: element k < 16 the low one of
// byte k, element k + 16 its high one; the fifth bit of element k is bit k of qh (ggml).
struct QuantBlock {
  uint16_t scale = 0;
  uint16_t min = 0;
  int8_t q[32];
  float Weight(int k) const {
    return affine ? canonical::AffineBlockWeight(scale, min, q[k])
                  : canonical::Q8_0Weight(scale, q[k]);
  }
  bool affine = false;
};
QuantBlock ReadQuantBlock(const WeightView& w, int64_t n, int64_t b);  // row-major w

// The weight element (row, col) of `w` as f32 (exact conversion).
float WeightAt(const WeightView& w, int64_t row, int64_t col);
// Converts `n` elements of row `row` of `w` into f32 `out`.
void WeightRowToF32(const WeightView& w, int64_t row, int64_t n, float* out);

// Calls fn(std::integral_constant<DType, D>{}) for the D that `dtype` names, so a kernel
// templated on its weight dtype is instantiated and chosen in one line. The plain types only:
// the dispatch sends the block types to their own paths (kernels.cc): reaching here with one is
// a bug.
template <class Fn>
decltype(auto) WithDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBF16:
      return fn(std::integral_constant<DType, DType::kBF16>{});
    case DType::kF16:
      return fn(std::integral_constant<DType, DType::kF16>{});
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      std::abort();
    case DType::kF32:
      break;
  }
  return fn(std::integral_constant<DType, DType::kF32>{});
}

// The row loops every CPU path of RmsNorm, RoPE and Embedding shares; a path supplies only
// the per-row arithmetic (scalar, AVX2 or AVX-512), so the loops are written once.

// RmsNorm: the weight row as f32 (thread-local), then per row m: inv = RmsInverse(dot(x_m,
// x_m)) and scale(x_m, inv, w, out_m, n). x and out may alias (row by row, read then write).
template <class Dot, class ScaleRow>
void RmsNormRows(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps,
                 float* out, Dot dot, ScaleRow scale) {
  thread_local std::vector<float> w;
  w.resize(static_cast<size_t>(n));
  WeightRowToF32(weight, 0, n, w.data());
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * n;
    scale(xr, canonical::RmsInverse(dot(xr, xr, n), n, eps), w.data(), out + m * n, n);
  }
}

// RoPE: rotate(v, c, s, half) for every head v of every row, with row m's cos / sin table
// rows (position positions[m]).
template <class RotateHead>
void RopeHeads(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
               const float* cos_table, const float* sin_table, RotateHead rotate) {
  const int64_t half = head_dim / 2;
  for (int64_t m = 0; m < M; ++m) {
    const float* c = cos_table + static_cast<int64_t>(positions[m]) * half;
    const float* s = sin_table + static_cast<int64_t>(positions[m]) * half;
    for (int64_t h = 0; h < n_heads; ++h) rotate(x + (m * n_heads + h) * head_dim, c, s, half);
  }
}

// The canonical MatMul one weight row at a time: row n as f32 (WeightRowToF32: any dtype and
// layout), then y[m, n] = dot(x_m, row) (+ bias[n]) for every m, where `dot` is a path's
// canonical dot (the contract's: every path gives the reference's bits). The reference MatMul,
// and every path's MatMul of K-quant matrices (which stay row-major, dequantized per row).
using DotFn = float (*)(const float* a, const float* b, int64_t n);
void MatMulRowsCanonical(const float* x, int64_t M, const WeightView& w, const float* bias,
                         float* y, int64_t n_begin, int64_t n_end, DotFn dot);

bool HaveAvx2();    // AVX2, FMA and F16C, checked once with __builtin_cpu_supports
bool HaveAvx512();  // HaveAvx2() and AVX-512 F, BW, DQ and VL
bool HaveNeon();    // an aarch64 build (Advanced SIMD is part of the architecture)

namespace ref {
void MatMulCanonical(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end);
void MatMulFast(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                int64_t n_begin, int64_t n_end);
void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps, float* out);
void Embedding(const WeightView& table, const int32_t* ids, int64_t M, float* out);
void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void Add(const float* a, const float* b, int64_t n, float* y);
void MoeRouteRows(const float* logits, int64_t M, int64_t E, int64_t k, bool normalize,
                  int32_t* ids, float* weights);
void MoeCombine(const float* expert_out, const int32_t* ids, const float* weights, int64_t M,
                int64_t k, int64_t n, float* out);
void MoeAddShared(const float* shared_out, const float* gate_logits, int64_t M, int64_t n,
                  float* out);
void AttentionCanonical(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* scratch, float* out, int64_t h_begin, int64_t h_end);
void AttentionFast(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                   int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale, float* out,
                   int64_t h_begin, int64_t h_end);
}  // namespace ref

namespace avx2 {
void MatMulCanonical(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end);
void MatMulFast(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                int64_t n_begin, int64_t n_end);
float CanonicalDot(const float* a, const float* b, int64_t n);
void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps, float* out);
void Embedding(const WeightView& table, const int32_t* ids, int64_t M, float* out);
void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void Add(const float* a, const float* b, int64_t n, float* y);
void Exp8(const float* x, int64_t n, float* out);  // out[i] = Exp(x[i]), vectorised
void AttentionCanonical(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* scratch, float* out, int64_t h_begin, int64_t h_end);
void AttentionFast(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                   int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale, float* out,
                   int64_t h_begin, int64_t h_end);
}  // namespace avx2

namespace avx512 {
void MatMulCanonical(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end);
float CanonicalDot(const float* a, const float* b, int64_t n);
void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps, float* out);
void Embedding(const WeightView& table, const int32_t* ids, int64_t M, float* out);
void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void Add(const float* a, const float* b, int64_t n, float* y);
void Exp16(const float* x, int64_t n, float* out);  // out[i] = Exp(x[i]), vectorised
// Canonical only: fast attention runs avx2::AttentionFast on the AVX-512 path.
void AttentionCanonical(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* scratch, float* out, int64_t h_begin, int64_t h_end);
}  // namespace avx512

namespace neon {
void MatMulCanonical(const float* x, int64_t M, const WeightView& w, const float* bias, float* y,
                     int64_t n_begin, int64_t n_end);
float CanonicalDot(const float* a, const float* b, int64_t n);
void RmsNorm(const float* x, int64_t M, int64_t n, const WeightView& weight, float eps, float* out);
void Embedding(const WeightView& table, const int32_t* ids, int64_t M, float* out);
void Rope(float* x, int64_t M, int64_t n_heads, int64_t head_dim, const int32_t* positions,
          const float* cos_table, const float* sin_table);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void Add(const float* a, const float* b, int64_t n, float* y);
void Exp4(const float* x, int64_t n, float* out);  // out[i] = Exp(x[i]), vectorised
void AttentionCanonical(const float* q, const float* k_cache, const float* v_cache, int64_t pos,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
                        float* scratch, float* out, int64_t h_begin, int64_t h_end);
}  // namespace neon

}  // namespace trace::kernels
