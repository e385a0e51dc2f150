// Dispatch of kernels/kernels.h: picks the scalar reference, the AVX2, AVX-512 or NEON path
// (checked once at run time, capped by TRACE_CPU_ISA or forced by Impl; each path a table of
// its ops) and splits independent outputs over the thread pool. Never splits a reduction: every
// output element is computed whole by one thread.
#include "kernels/kernels.h"

// The x86 SIMD paths (kernels/cpu/avx2_*, avx512_*) are compiled only for x86
// (kernels/CMakeLists.txt); elsewhere the CPU has no path but the scalar reference, and the
// SIMD branches below are not compiled.
#if defined(__x86_64__) || defined(__i386__)
#define TRACE_X86_SIMD 1
#include <cpuid.h>
#else
#define TRACE_X86_SIMD 0
#endif
// The NEON paths (kernels/cpu/neon_*) are compiled only for aarch64, where Advanced SIMD is
// part of the architecture.
#if defined(__aarch64__)
#define TRACE_NEON_SIMD 1
#else
#define TRACE_NEON_SIMD 0
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/canonical.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kquant_interleaved.h"
#include "kernels/thread_pool.h"

namespace trace::kernels {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return 0;
  }
  return 0;
}

int64_t BlockBytes(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
      return kQ8_0BlockBytes;
    case DType::kQ4_0:
      return kQ4_0BlockBytes;
    case DType::kQ5_0:
      return 22;
    case DType::kQ4_1:
      return 20;
    case DType::kQ5_1:
      return 24;
    case DType::kQ4_K:
      return 144;
    case DType::kQ5_K:
      return 176;
    case DType::kQ6_K:
      return 210;
    case DType::kF32:
    case DType::kBF16:
    case DType::kF16:
      break;
  }
  return 0;
}

size_t WeightBytes(DType dtype, int64_t rows, int64_t cols) {
  if (IsQuantized(dtype) || IsKQuant(dtype)) {
    const int64_t elems = IsKQuant(dtype) ? kKQuantBlockElems : kQ8_0BlockElems;
    return static_cast<size_t>(rows * (cols / elems) * BlockBytes(dtype));
  }
  return static_cast<size_t>(rows * cols) * DTypeSize(dtype);
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kQ4_0:
      return "q4_0";
    case DType::kQ5_0:
      return "q5_0";
    case DType::kQ4_1:
      return "q4_1";
    case DType::kQ5_1:
      return "q5_1";
    case DType::kQ4_K:
      return "q4_k";
    case DType::kQ5_K:
      return "q5_k";
    case DType::kQ6_K:
      return "q6_k";
  }
  return "unknown";
}

const char* NumericsName(Numerics numerics) {
  return numerics == Numerics::kCanonical ? "canonical" : "fast";
}

bool ParseNumerics(std::string_view name, Numerics* numerics) {
  if (name == "canonical" || name == kNumericsVersion) {
    *numerics = Numerics::kCanonical;
  } else if (name == "fast") {
    *numerics = Numerics::kFast;
  } else {
    return false;
  }
  return true;
}

float Bf16ToF32(uint16_t v) {
  return canonical::Bf16ToF32(v);
}

float F16ToF32(uint16_t v) {
  return canonical::F16ToF32(v);
}

uint16_t F32ToBf16RoundNearestEven(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

uint16_t F32ToF16RoundNearestEven(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (abs >= 0x38800000u) {                       // normal f16
    const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
  }
  if (abs < 0x33000000u) return sign;  // < 2^-25: rounds to zero
  // Subnormal f16: value = m * 2^-24; shift the 24-bit significand, round half even.
  const uint32_t exponent = abs >> 23;
  const uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exponent;  // 14..24
  uint32_t result = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (result & 1u))) ++result;
  return sign | static_cast<uint16_t>(result);
}

size_t InterleavedWeightsBytes(const WeightView& w) {
  const int64_t groups = (w.rows + 31) / 32;
  if (kquant::UsesRecords(w.dtype)) return static_cast<size_t>(kquant::InterleavedBytes(w));
  if (IsQuantized(w.dtype)) {
    return static_cast<size_t>(groups * (w.cols / kQ8_0BlockElems) * kQ8_0Interleaved32BlockBytes);
  }
  return static_cast<size_t>(groups * 32 * w.cols) * DTypeSize(w.dtype);
}

QuantBlock ReadQuantBlock(const WeightView& w, int64_t n, int64_t b) {
  const int64_t blocks = w.cols / kQ8_0BlockElems;
  const auto* block = static_cast<const uint8_t*>(w.data) + (n * blocks + b) * BlockBytes(w.dtype);
  QuantBlock out;
  std::memcpy(&out.scale, block, 2);
  if (w.dtype == DType::kQ8_0) {
    for (int k = 0; k < 32; ++k) out.q[k] = static_cast<int8_t>(block[2 + k]);
    return out;
  }
  out.affine = IsAffineBlock32(w.dtype);
  const uint8_t* p = block + 2;
  if (out.affine) {
    std::memcpy(&out.min, p, 2);
    p += 2;
  }
  const bool fifth = w.dtype == DType::kQ5_0 || w.dtype == DType::kQ5_1;
  uint32_t qh = 0;
  if (fifth) {
    std::memcpy(&qh, p, 4);
    p += 4;
  }
  const int offset = out.affine ? 0 : fifth ? 16 : 8;
  for (int k = 0; k < 32; ++k) {
    int q = (k < 16 ? p[k] & 0x0f : p[k - 16] >> 4);
    if (fifth) q |= static_cast<int>((qh >> k) & 1u) << 4;
    out.q[k] = static_cast<int8_t>(q - offset);
  }
  return out;
}

namespace {

// Q8_0, Q4_0 and Q5_0 into kInterleaved32: per (group, block), the 32 rows' scales as f32 (exact),
// then the int8 values as [k % 32][row % 32]; missing rows of the last group stay zero.
void InterleaveQuantized(const WeightView& w, uint8_t* out) {
  const int64_t blocks = w.cols / kQ8_0BlockElems;
  for (int64_t n = 0; n < w.rows; ++n) {
    for (int64_t b = 0; b < blocks; ++b) {
      const QuantBlock block = ReadQuantBlock(w, n, b);
      uint8_t* dst = out + ((n / 32) * blocks + b) * kQ8_0Interleaved32BlockBytes;
      const float scale = canonical::F16ToF32(block.scale);
      std::memcpy(dst + 4 * (n % 32), &scale, 4);
      for (int64_t k = 0; k < kQ8_0BlockElems; ++k) {
        dst[128 + k * 32 + n % 32] = static_cast<uint8_t>(block.q[k]);
      }
    }
  }
}

}  // namespace

WeightView InterleaveWeights(const WeightView& w, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  std::memset(out, 0, InterleavedWeightsBytes(w));
  if (kquant::UsesRecords(w.dtype)) {
    kquant::Interleave(w, out);
  } else if (IsQuantized(w.dtype)) {
    InterleaveQuantized(w, out);
  } else {
    const size_t elem = DTypeSize(w.dtype);
    const int64_t groups = (w.rows + 31) / 32;
    const auto* src = static_cast<const uint8_t*>(w.data);
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t c = 0; c < 32 && g * 32 + c < w.rows; ++c) {
        const uint8_t* row = src + static_cast<size_t>((g * 32 + c) * w.cols) * elem;
        for (int64_t k = 0; k < w.cols; ++k) {
          std::memcpy(out + static_cast<size_t>((g * w.cols + k) * 32 + c) * elem,
                      row + static_cast<size_t>(k) * elem, elem);
        }
      }
    }
  }
  WeightView view = w;
  view.data = dst;
  view.layout = WeightLayout::kInterleaved32;
  if (IsQuantized(w.dtype) && !kquant::UsesRecords(w.dtype)) {
    view.dtype = DType::kQ8_0;  // Q4_0's and Q5_0's values as int8
  }
  return view;
}

namespace {

// Element (row, col) of a Q8_0 or Q4_0 matrix (row-major), or of the interleaved layout.
float QuantizedAt(const WeightView& w, int64_t row, int64_t col) {
  const int64_t blocks = w.cols / kQ8_0BlockElems, b = col / kQ8_0BlockElems;
  if (w.layout == WeightLayout::kRowMajor) {
    return ReadQuantBlock(w, row, b).Weight(static_cast<int>(col % kQ8_0BlockElems));
  }
  const auto* block = static_cast<const uint8_t*>(w.data) +
                      ((row / 32) * blocks + b) * kQ8_0Interleaved32BlockBytes;
  float scale;
  std::memcpy(&scale, block + 4 * (row % 32), 4);
  return scale * static_cast<float>(static_cast<int8_t>(block[128 + (col % 32) * 32 + row % 32]));
}

// Super-block b of row `row` of a K-quant matrix (row-major), dequantized into out[256]. (Not
// target_clones: its ifunc resolver runs before ThreadSanitizer's runtime is up and crashes
// the TSan build.)
void DequantizeKQuantBlock(const WeightView& w, int64_t row, int64_t b, float* out) {
  const int64_t blocks = w.cols / kKQuantBlockElems;
  const auto* block =
      static_cast<const uint8_t*>(w.data) + (row * blocks + b) * BlockBytes(w.dtype);
  switch (w.dtype) {
    case DType::kQ4_K:
      return canonical::DequantizeQ4_K(block, out);
    case DType::kQ5_K:
      return canonical::DequantizeQ5_K(block, out);
    default:
      return canonical::DequantizeQ6_K(block, out);
  }
}

}  // namespace

float WeightAt(const WeightView& w, int64_t row, int64_t col) {
  // Records first: Q4_1 / Q5_1 are also blocks of 32 (IsQuantized), but their interleaved
  // layout is the records', not Q8_0's.
  if (kquant::UsesRecords(w.dtype) && w.layout == WeightLayout::kInterleaved32) {
    float block[canonical::kBlockLen];
    kquant::InterleavedBlockToF32(w, row, col / canonical::kBlockLen, canonical::kBlockLen, block);
    return block[col % canonical::kBlockLen];
  }
  if (IsQuantized(w.dtype)) return QuantizedAt(w, row, col);
  if (IsKQuant(w.dtype)) {
    float block[kKQuantBlockElems];
    DequantizeKQuantBlock(w, row, col / kKQuantBlockElems, block);
    return block[col % kKQuantBlockElems];
  }
  const int64_t i = w.layout == WeightLayout::kRowMajor
                        ? row * w.cols + col
                        : ((row / 32) * w.cols + col) * 32 + row % 32;
  switch (w.dtype) {
    case DType::kF32:
      return static_cast<const float*>(w.data)[i];
    case DType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(w.data)[i]);
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(w.data)[i]);
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      break;
  }
  return 0.0f;
}

void WeightRowToF32(const WeightView& w, int64_t row, int64_t n, float* out) {
  if (w.layout != WeightLayout::kRowMajor && kquant::UsesRecords(w.dtype)) {
    return kquant::InterleavedRowToF32(w, row, n, out);
  }
  if (w.layout != WeightLayout::kRowMajor) {
    for (int64_t i = 0; i < n; ++i) out[i] = WeightAt(w, row, i);
    return;
  }
  const int64_t base = row * w.cols;
  switch (w.dtype) {
    case DType::kF32:
      std::memcpy(out, static_cast<const float*>(w.data) + base, static_cast<size_t>(n) * 4);
      return;
    case DType::kBF16: {
      const uint16_t* src = static_cast<const uint16_t*>(w.data) + base;
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(src[i]);
      return;
    }
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(w.data) + base;
      for (int64_t i = 0; i < n; ++i) out[i] = F16ToF32(src[i]);
      return;
    }
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_1:
    case DType::kQ5_1:
      for (int64_t b = 0; b * kQ8_0BlockElems < n; ++b) {
        const QuantBlock block = ReadQuantBlock(w, row, b);
        for (int64_t k = 0; k < kQ8_0BlockElems && b * kQ8_0BlockElems + k < n; ++k) {
          out[b * kQ8_0BlockElems + k] = block.Weight(static_cast<int>(k));
        }
      }
      return;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: {
      float block[kKQuantBlockElems];
      for (int64_t b = 0; b * kKQuantBlockElems < n; ++b) {
        const int64_t done = b * kKQuantBlockElems;
        if (n - done >= kKQuantBlockElems) {
          DequantizeKQuantBlock(w, row, b, out + done);
        } else {
          DequantizeKQuantBlock(w, row, b, block);
          std::memcpy(out + done, block, static_cast<size_t>(n - done) * 4);
        }
      }
      return;
    }
  }
}

bool HaveAvx2() {
#if !TRACE_X86_SIMD
  return false;
#else
  static const bool have = [] {
    __builtin_cpu_init();
    // F16C through cpuid: clang (14) has no "f16c" for __builtin_cpu_supports.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  }();
  return have;
#endif
}

bool HaveNeon() {
  return TRACE_NEON_SIMD != 0;  // Advanced SIMD is mandatory on AArch64
}

bool HaveAvx512() {
#if !TRACE_X86_SIMD
  return false;
#else
  static const bool have = [] {
    __builtin_cpu_init();
    return HaveAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }();
  return have;
#endif
}

bool ParseCpuIsaPath(std::string_view name, Impl* impl) {
  if (name == "scalar" || name == "reference") {
    *impl = Impl::kReference;
  } else if (name == "avx2") {
    *impl = Impl::kAvx2;
  } else if (name == "avx512") {
    *impl = Impl::kAvx512;
  } else if (name == "neon") {
    *impl = Impl::kNeon;
  } else if (name == "auto") {
    *impl = Impl::kAuto;
  } else {
    return false;
  }
  return true;
}

Impl CpuIsaOverride() {
  static const Impl cap = [] {
    const char* env = std::getenv("TRACE_CPU_ISA");
    Impl impl = Impl::kAuto;
    if (env != nullptr && *env != '\0' && !ParseCpuIsaPath(env, &impl)) {
      std::fprintf(stderr,
                   "trace: TRACE_CPU_ISA=%s is not one of scalar|avx2|avx512|neon|auto; ignored\n",
                   env);
      impl = Impl::kAuto;
    }
    return impl;
  }();
  return cap;
}

namespace {

// ---- the CPU paths as tables ----------------------------------------------------------------
// Each path is a table of its ops; where a path has no op of its own the table names the one it
// runs instead (the reference, or AVX2's for AVX-512's fast ops), so the dispatch below is one
// lookup per op and a new path is one table.
using MatMulFn = void (*)(const float* x, int64_t M, const WeightView& w, const float* bias,
                          float* y, int64_t n_begin, int64_t n_end);
using RmsNormFn = void (*)(const float* x, int64_t M, int64_t n, const WeightView& weight,
                           float eps, float* out);
using EmbeddingFn = void (*)(const WeightView& table, const int32_t* ids, int64_t M, float* out);
using RopeFn = void (*)(float* x, int64_t M, int64_t n_heads, int64_t head_dim,
                        const int32_t* positions, const float* cos_table, const float* sin_table);
using ElementwiseFn = void (*)(const float* a, const float* b, int64_t n, float* out);
using ExpFn = void (*)(const float* x, int64_t n, float* out);
using AttentionCanonicalFn = void (*)(const float* q, const float* k_cache, const float* v_cache,
                                      int64_t pos, int64_t n_heads, int64_t n_kv_heads,
                                      int64_t head_dim, float scale, float* scratch, float* out,
                                      int64_t h_begin, int64_t h_end);
using AttentionFastFn = void (*)(const float* q, const float* k_cache, const float* v_cache,
                                 int64_t pos, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                 float scale, float* out, int64_t h_begin, int64_t h_end);

struct CpuPath {
  const char* name;  // CpuIsaPathName: recorded in fingerprints
  MatMulFn matmul_canonical, matmul_fast;
  // Which block types matmul_canonical takes (the rest run the reference; fast numerics on
  // a block type always does): Q8_0 in either layout, row-major Q4_0 (kInterleaved32 holds
  // Q4_0 as Q8_0).
  bool canonical_q8_0, canonical_q4_0;
  // Whether matmul_canonical takes the records of nibbles (K-quants, Q4_1, Q5_1) in the
  // kInterleaved32 layout (kernels/kquant_interleaved.h); otherwise they run
  // MatMulRowsCanonical with this path's dot.
  bool canonical_records;
  // Column ranges handed to threads by the canonical MatMul on row-major weights are multiples
  // of this (kInterleaved32 weights: always 32), so the path sees whole register groups; the
  // split does not change any output bit.
  int64_t row_major_column_group;
  DotFn dot;  // the canonical dot: RmsNorm's, and the MatMul of K-quant rows
  RmsNormFn rms_norm;
  EmbeddingFn embedding;
  RopeFn rope;
  ElementwiseFn silu_mul, gelu_tanh_mul, add;
  ExpFn exp;
  AttentionCanonicalFn attention_canonical;
  AttentionFastFn attention_fast;
};

void RefExp(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Exp(x[i]);
}

constexpr CpuPath kReferencePath = {
    .name = "reference",
    .matmul_canonical = ref::MatMulCanonical,
    .matmul_fast = ref::MatMulFast,
    .canonical_q8_0 = false,
    .canonical_q4_0 = false,
    .canonical_records = false,
    .row_major_column_group = 8,
    .dot = CanonicalDot,
    .rms_norm = ref::RmsNorm,
    .embedding = ref::Embedding,
    .rope = ref::Rope,
    .silu_mul = ref::SiluMul,
    .gelu_tanh_mul = ref::GeluTanhMul,
    .add = ref::Add,
    .exp = RefExp,
    .attention_canonical = ref::AttentionCanonical,
    .attention_fast = ref::AttentionFast,
};
#if TRACE_X86_SIMD
constexpr CpuPath kAvx2Path = {
    .name = "avx2",
    .matmul_canonical = avx2::MatMulCanonical,
    .matmul_fast = avx2::MatMulFast,
    .canonical_q8_0 = true,
    .canonical_q4_0 = false,
    .canonical_records = true,
    .row_major_column_group = 8,
    .dot = avx2::CanonicalDot,
    .rms_norm = avx2::RmsNorm,
    .embedding = avx2::Embedding,
    .rope = avx2::Rope,
    .silu_mul = avx2::SiluMul,
    .gelu_tanh_mul = avx2::GeluTanhMul,
    .add = avx2::Add,
    .exp = avx2::Exp8,
    .attention_canonical = avx2::AttentionCanonical,
    .attention_fast = avx2::AttentionFast,
};
// Fast MatMul and fast attention have no AVX-512 code: they run AVX2's.
constexpr CpuPath kAvx512Path = {
    .name = "avx512",
    .matmul_canonical = avx512::MatMulCanonical,
    .matmul_fast = avx2::MatMulFast,
    .canonical_q8_0 = true,
    .canonical_q4_0 = false,
    .canonical_records = true,
    .row_major_column_group = 32,
    .dot = avx512::CanonicalDot,
    .rms_norm = avx512::RmsNorm,
    .embedding = avx512::Embedding,
    .rope = avx512::Rope,
    .silu_mul = avx512::SiluMul,
    .gelu_tanh_mul = avx512::GeluTanhMul,
    .add = avx512::Add,
    .exp = avx512::Exp16,
    .attention_canonical = avx512::AttentionCanonical,
    .attention_fast = avx2::AttentionFast,
};
#endif
#if TRACE_NEON_SIMD
// Fast numerics promises no bits across machines: its MatMul and attention run the reference.
constexpr CpuPath kNeonPath = {
    .name = "neon",
    .matmul_canonical = neon::MatMulCanonical,
    .matmul_fast = ref::MatMulFast,
    .canonical_q8_0 = true,
    .canonical_q4_0 = true,
    .canonical_records = false,
    .row_major_column_group = 8,
    .dot = neon::CanonicalDot,
    .rms_norm = neon::RmsNorm,
    .embedding = neon::Embedding,
    .rope = neon::Rope,
    .silu_mul = neon::SiluMul,
    .gelu_tanh_mul = neon::GeluTanhMul,
    .add = neon::Add,
    .exp = neon::Exp4,
    .attention_canonical = neon::AttentionCanonical,
    .attention_fast = ref::AttentionFast,
};
#endif

enum class Isa : uint8_t { kScalar, kAvx2, kAvx512, kNeon };

const CpuPath& PathOf(Isa isa) {
  switch (isa) {
#if TRACE_X86_SIMD
    case Isa::kAvx2:
      return kAvx2Path;
    case Isa::kAvx512:
      return kAvx512Path;
#endif
#if TRACE_NEON_SIMD
    case Isa::kNeon:
      return kNeonPath;
#endif
    default:
      return kReferencePath;
  }
}

Isa BestIsa() {
  if (HaveNeon()) return Isa::kNeon;
  return HaveAvx512() ? Isa::kAvx512 : HaveAvx2() ? Isa::kAvx2 : Isa::kScalar;
}

// The path an explicit request runs: itself, or the best one below it that the CPU has (the
// x86 paths rank scalar < avx2 < avx512; NEON has only the scalar path below it).
Isa Requested(Impl impl) {
  switch (impl) {
    case Impl::kReference:
      return Isa::kScalar;
    case Impl::kNeon:
      return HaveNeon() ? Isa::kNeon : Isa::kScalar;
    case Impl::kAvx2:
      return HaveAvx2() ? Isa::kAvx2 : Isa::kScalar;
    case Impl::kAvx512:
      return HaveAvx512() ? Isa::kAvx512 : HaveAvx2() ? Isa::kAvx2 : Isa::kScalar;
    case Impl::kAuto:
      return BestIsa();
  }
  return Isa::kScalar;
}

// kAuto: the best path, capped by TRACE_CPU_ISA (a cap names a path this CPU may lack: it
// then runs the best one below it, as an explicit request does).
Isa ResolveIsa(Impl impl) {
  return Requested(impl != Impl::kAuto ? impl : CpuIsaOverride());
}

const CpuPath& PathFor(const KernelContext& ctx) {
  return PathOf(ResolveIsa(ctx.impl));
}

}  // namespace

const char* CpuIsaPathName(Impl impl) {
  return PathOf(ResolveIsa(impl)).name;
}

std::vector<Impl> AvailableCpuIsaPaths() {
  std::vector<Impl> paths;
  if (HaveNeon()) paths.push_back(Impl::kNeon);
  if (HaveAvx512()) paths.push_back(Impl::kAvx512);
  if (HaveAvx2()) paths.push_back(Impl::kAvx2);
  paths.push_back(Impl::kReference);
  return paths;
}

namespace {

// Splits the output columns [0, N) over the pool in ranges that are multiples of `group`, so a
// path sees whole register groups (the split changes no bit), and runs fn(n_begin, n_end).
template <class Fn>
void ForColumnRanges(ThreadPool* pool, int64_t M, int64_t N, int64_t group, Fn fn) {
  // Chunks the pool hands out dynamically: one 32-column panel in prefill (each panel is packed
  // once per block of rows anyway, so a finer split costs nothing and balances the threads);
  // 128 columns in decode, the width of the AVX-512 decode stream (4 groups of 32).
  const int64_t chunk_columns = M == 1 ? 128 : 32;
  const int64_t grain = std::max<int64_t>(1, chunk_columns / group);
  ParallelFor(pool, (N + group - 1) / group, grain, [&](int64_t g_begin, int64_t g_end) {
    fn(g_begin * group, std::min(N, g_end * group));
  });
}

}  // namespace

void MatMul(const KernelContext& ctx, const float* x, int64_t M, const WeightView& w,
            const float* bias, float* y) {
  if (M <= 0 || w.rows <= 0) return;
  const CpuPath& path = PathFor(ctx);
  const bool canonical = ctx.numerics == Numerics::kCanonical;
  if (kquant::UsesRecords(w.dtype)) {  // K-quants, Q4_1, Q5_1
    if (canonical && path.canonical_records && w.layout == WeightLayout::kInterleaved32) {
      ForColumnRanges(ctx.pool, M, w.rows, 32, [&](int64_t n_begin, int64_t n_end) {
        path.matmul_canonical(x, M, w, bias, y, n_begin, n_end);
      });
      return;
    }
    // Otherwise row by row, dequantized, through the path's dot (kernels.h).
    ForColumnRanges(ctx.pool, M, w.rows, 8, [&](int64_t n_begin, int64_t n_end) {
      canonical ? MatMulRowsCanonical(x, M, w, bias, y, n_begin, n_end, path.dot)
                : ref::MatMulFast(x, M, w, bias, y, n_begin, n_end);
    });
    return;
  }
  const bool simd =
      !IsQuantized(w.dtype) ||
      (canonical && (w.dtype == DType::kQ8_0 ? path.canonical_q8_0 : path.canonical_q4_0));
  const MatMulFn run = !simd       ? (canonical ? ref::MatMulCanonical : ref::MatMulFast)
                       : canonical ? path.matmul_canonical
                                   : path.matmul_fast;
  const int64_t group = w.layout == WeightLayout::kInterleaved32 ? 32
                        : canonical                              ? path.row_major_column_group
                                                                 : 8;
  ForColumnRanges(ctx.pool, M, w.rows, group,
                  [&](int64_t n_begin, int64_t n_end) { run(x, M, w, bias, y, n_begin, n_end); });
}

void RmsNorm(const KernelContext& ctx, const float* x, int64_t M, int64_t n,
             const WeightView& weight, float eps, float* out) {
  const RmsNormFn run = PathFor(ctx).rms_norm;
  ParallelFor(ctx.pool, M, [&](int64_t begin, int64_t end) {
    run(x + begin * n, end - begin, n, weight, eps, out + begin * n);
  });
}

void Embedding(const KernelContext& ctx, const WeightView& table, const int32_t* ids, int64_t M,
               float* out, float scale) {
  // A block type's rows are dequantized by the reference (M rows: no stream to speed up).
  const bool blocks = IsQuantized(table.dtype) || IsKQuant(table.dtype);
  (blocks ? ref::Embedding : PathFor(ctx).embedding)(table, ids, M, out);
  if (scale != 1.0f) {  // one rounded multiply per element (the compiler vectorises it)
    const int64_t n = M * table.cols;
    for (int64_t i = 0; i < n; ++i) out[i] = canonical::Mul(out[i], scale);
  }
}

void Rope(const KernelContext& ctx, float* x, int64_t M, int64_t n_heads, int64_t head_dim,
          const int32_t* positions, const float* cos_table, const float* sin_table) {
  PathFor(ctx).rope(x, M, n_heads, head_dim, positions, cos_table, sin_table);
}

namespace {

// Runs an elementwise op of (gate, up) in chunks of 4096 over the pool; any split gives the
// same bits.
void RunGated(const KernelContext& ctx, const float* gate, const float* up, int64_t n, float* out,
              ElementwiseFn op) {
  constexpr int64_t kChunk = 4096;
  ParallelFor(ctx.pool, (n + kChunk - 1) / kChunk, [&](int64_t c_begin, int64_t c_end) {
    const int64_t begin = c_begin * kChunk;
    const int64_t end = std::min(n, c_end * kChunk);
    op(gate + begin, up + begin, end - begin, out + begin);
  });
}

}  // namespace

void SiluMul(const KernelContext& ctx, const float* gate, const float* up, int64_t n, float* out) {
  RunGated(ctx, gate, up, n, out, PathFor(ctx).silu_mul);
}

void GeluTanhMul(const KernelContext& ctx, const float* gate, const float* up, int64_t n,
                 float* out) {
  RunGated(ctx, gate, up, n, out, PathFor(ctx).gelu_tanh_mul);
}

void ExpArray(const KernelContext& ctx, const float* x, int64_t n, float* out) {
  PathFor(ctx).exp(x, n, out);
}

void Add(const KernelContext& ctx, const float* a, const float* b, int64_t n, float* y) {
  PathFor(ctx).add(a, b, n, y);
}

void Attention(const KernelContext& ctx, const float* q, const float* k_cache, const float* v_cache,
               int64_t pos, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale,
               float* scratch, float* out) {
  const CpuPath& path = PathFor(ctx);
  const bool canonical = ctx.numerics == Numerics::kCanonical;
  const bool split = ctx.pool != nullptr && ctx.pool->num_threads() > 1 && n_heads > 1;
  ParallelFor(split ? ctx.pool : nullptr, n_heads, [&](int64_t h_begin, int64_t h_end) {
    // The caller's scratch serves a single-threaded call; split calls use per-thread
    // buffers so that heads on different threads do not share one.
    thread_local std::vector<float> own_scratch;
    float* buffer = scratch;
    if (split) {
      own_scratch.resize(static_cast<size_t>(2 * (pos + 1)));
      buffer = own_scratch.data();
    }
    if (canonical) {
      path.attention_canonical(q, k_cache, v_cache, pos, n_heads, n_kv_heads, head_dim, scale,
                               buffer, out, h_begin, h_end);
    } else {
      path.attention_fast(q, k_cache, v_cache, pos, n_heads, n_kv_heads, head_dim, scale, out,
                          h_begin, h_end);
    }
  });
}

void MoeRoute(const KernelContext& ctx, const float* logits, int64_t M, int64_t E, int64_t k,
              bool normalize, int32_t* ids, float* weights) {
  // Rows are independent: split them over the pool (any split gives the same bits).
  ParallelFor(ctx.pool, M, [&](int64_t begin, int64_t end) {
    ref::MoeRouteRows(logits + begin * E, end - begin, E, k, normalize, ids + begin * k,
                      weights + begin * k);
  });
  if (ctx.numerics == Numerics::kCanonical || M == 0) return;
  // Fast: capacity ceil(M * k / E) per expert, first choices of every row first. Each row's
  // choices in rank order are its ids sorted by (probability desc, id asc); since the
  // weights are the probabilities (renormalised or not, the same order), rank by them.
  const int64_t capacity = (M * k + E - 1) / E;
  std::vector<int64_t> load(static_cast<size_t>(E), 0);
  std::vector<std::vector<int64_t>> order(static_cast<size_t>(M));
  for (int64_t m = 0; m < M; ++m) {
    auto& o = order[static_cast<size_t>(m)];
    o.resize(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) o[static_cast<size_t>(j)] = j;
    std::stable_sort(o.begin(), o.end(), [&](int64_t a, int64_t b) {
      return canonical::RanksBefore(weights[m * k + a], ids[m * k + a], weights[m * k + b],
                                    ids[m * k + b]);
    });
  }
  for (int64_t rank = 0; rank < k; ++rank) {
    for (int64_t m = 0; m < M; ++m) {
      const int64_t j = order[static_cast<size_t>(m)][static_cast<size_t>(rank)];
      int32_t& id = ids[m * k + j];
      if (load[static_cast<size_t>(id)]++ >= capacity) {
        id = -1;
        weights[m * k + j] = 0.0f;
      }
    }
  }
}

void MoeCombine(const KernelContext& ctx, const float* expert_out, const int32_t* ids,
                const float* weights, int64_t M, int64_t k, int64_t n, float* out) {
  ParallelFor(ctx.pool, M, [&](int64_t begin, int64_t end) {
    ref::MoeCombine(expert_out + begin * k * n, ids + begin * k, weights + begin * k, end - begin,
                    k, n, out + begin * n);
  });
}

void MoeAddShared(const KernelContext& ctx, const float* shared_out, const float* gate_logits,
                  int64_t M, int64_t n, float* out) {
  ParallelFor(ctx.pool, M, [&](int64_t begin, int64_t end) {
    ref::MoeAddShared(shared_out + begin * n, gate_logits + begin, end - begin, n, out + begin * n);
  });
}

}  // namespace trace::kernels
