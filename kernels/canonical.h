// The arithmetic of the numerics contract canonical-v2 (docs/numerics.md), written once and
// compiled by g++ for the CPU and by nvcc for CUDA (every function is __host__ __device__
// there). Every CPU reference (kernels/cpu/ref_*.cc), every SIMD path (kernels/cpu/avx2_*.cc,
// kernels/cpu/avx512_*.cc) and every canonical CUDA kernel (kernels/cuda/schedule/) computes
// through these functions, so each rounding and the order of every reduction exist in one place.
//
// How to use it
// -------------
// 1. Scalar code calls the free functions: Fma, Add, Sub, Mul, Div, Sqrt (one IEEE binary32
//    rounding each, round to nearest even; Fma is one rounding of a*b+c, the only fused
//    operation of the contract), Exp, SiluMul, RopeRotate, RmsInverse, MaxStep/MaxFinish, and
//    the canonical dot: LanePartialDot (lane l's chain over blocks l, l+32, ...), FoldLanes
//    (the left fold of the 32 lane values), Dot and Sum.
// 2. SIMD code (8-wide AVX2 today, 16-wide AVX-512 later) instantiates the same templates with
//    its own arithmetic type A, so a vector of V = 8 or 16 floats runs the very same sequence
//    of operations per element: ExpCore<A>, Silu<A>/SiluMul<A>, RopeRotate<A>, RmsScale<A>,
//    ChainStep<A>, SumStep<A>, FoldStep<A>/FoldLanes<A>, MaxStep<A>. An arithmetic type is a
//    struct of static functions, one rounding each, exactly like `Scalar` below:
//        using V;            // the value: float, __m256, __m512, ...
//        using I;            // an integer vector of the same width: int32_t, __m256i, __m512i
//        V Set1(float)       // broadcast a constant
//        V Fma(V a, V b, V c), Add, Sub, Mul, Div, Sqrt, Neg (exact sign flip)
//        I ToInt(V)          // of a value that is already an integer (exact)
//        I HalfFloor(I)      // arithmetic shift right by one (floor of i / 2)
//        I SubInt(I, I)
//        V Pow2(I e)         // 2^e for e in [-126, 127], built from the exponent bits (exact)
//        V MaxStep(V mx, V v)  // v > mx ? v : mx per element (_mm256_max_ps(v, mx) is exactly
//                              // this: it returns mx when v is NaN)
//        V Exp(V)            // ExpCore<A> plus the special cases of Exp (blends for SIMD)
//    kernels/cpu/avx2_common.h defines `avx2::Arith`; an AVX-512 `Arith` adds nothing new.
//    Vectorise ACROSS independent outputs (columns, heads, elements), never along one chain:
//    each element of a V must be one lane chain of the contract, visited in increasing k.
// 3. CUDA: the same free functions run on the device with explicitly rounded intrinsics
//    (__fmaf_rn, __fadd_rn, ...); the kernels additionally need --fmad=false so that nothing
//    outside these functions is contracted.
//
// Ownership: none (pure functions over caller-owned memory). Thread safety: reentrant.
// Errors: none; lengths and pointers are the caller's contract.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TRACE_HD __host__ __device__ __forceinline__
#else
#define TRACE_HD inline
#endif

namespace trace::kernels::canonical {

// ---- the dot product's geometry (docs/numerics.md section 3) -----------------------------
inline constexpr int kLanes = 32;     // lane chains of every dot product and sum
inline constexpr int kBlockLen = 32;  // consecutive elements per block; block b -> lane b % 32

TRACE_HD int64_t NumBlocks(int64_t n) {
  return (n + kBlockLen - 1) / kBlockLen;
}
TRACE_HD int LaneOfBlock(int64_t block) {
  return static_cast<int>(block % kLanes);
}
TRACE_HD int LaneOfElement(int64_t k) {
  return LaneOfBlock(k / kBlockLen);
}
TRACE_HD int64_t BlockBegin(int64_t block) {
  return block * kBlockLen;
}
// One past the last element of `block` in a length-n vector (the last block may be short).
TRACE_HD int64_t BlockEnd(int64_t block, int64_t n) {
  return (block + 1) * kBlockLen < n ? (block + 1) * kBlockLen : n;
}

// ---- bits --------------------------------------------------------------------------------
TRACE_HD float BitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}
TRACE_HD float PlusInfinity() {
  return BitsToFloat(0x7f800000u);
}
TRACE_HD float MinusInfinity() {
  return BitsToFloat(0xff800000u);
}
TRACE_HD bool IsNan(float x) {
  return x != x;  // never compiled with fast-math
}

// Exact conversions of stored weights (section 2): bf16 is the high half of an f32.
TRACE_HD float Bf16ToF32(uint16_t v) {
  return BitsToFloat(static_cast<uint32_t>(v) << 16);
}
// IEEE half -> f32, exact, subnormals included (NaN payload kept).
TRACE_HD float F16ToF32(uint16_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x8000u) << 16;
  const uint32_t exponent = (v >> 10) & 0x1fu;
  uint32_t mantissa = v & 0x3ffu;
  if (exponent == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsToFloat(sign);
  int e = -1;  // subnormal: normalise
  do {
    ++e;
    mantissa <<= 1;
  } while ((mantissa & 0x400u) == 0);
  return BitsToFloat(sign | (static_cast<uint32_t>(112 - e) << 23) | ((mantissa & 0x3ffu) << 13));
}

// ggml's Q8_0 weight: its block's f16 scale times its int8 value. The product of an 11-bit and
// an 8-bit significand is exact in f32: the dequantized weight is the real number the file
// means, and every canonical dot over it is the dot over those numbers.
TRACE_HD float Q8_0Weight(uint16_t scale_f16, int8_t q) {
  return F16ToF32(scale_f16) * static_cast<float>(q);
}

// ggml's Q5_0 weight is Q8_0Weight(d, q - 16) (q of 5 bits: exact). Q4_1 / Q5_1: the f16 d
// times q (0..15 or 0..31: exact, at most 16 bits) plus the block's f16 min m, one rounding:
// ggml's `x0*d + m`, contracted into an fma or not.
// (AffineBlock32Weight, for any arithmetic type, is defined after Scalar below.)

// ---- the scalar arithmetic: one rounding per call ------------------------------------------
struct Scalar {
  using V = float;
  using I = int32_t;
  TRACE_HD static V Set1(float c) { return c; }
  TRACE_HD static V Fma(V a, V b, V c) {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
  }
  TRACE_HD static V Add(V a, V b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;  // -ffp-contract=off: never fused with a neighbouring multiply
#endif
  }
  TRACE_HD static V Sub(V a, V b) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
  }
  TRACE_HD static V Mul(V a, V b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
  }
  TRACE_HD static V Div(V a, V b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
  }
  TRACE_HD static V Sqrt(V a) {
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(a);
#else
    return std::sqrt(a);
#endif
  }
  TRACE_HD static V Neg(V a) {
    return -a;
  }
  TRACE_HD static I ToInt(V integral) {
    return static_cast<I>(integral);
  }
  TRACE_HD static I HalfFloor(I i) {
    return i >> 1;
  }
  TRACE_HD static I SubInt(I a, I b) {
    return a - b;
  }
  TRACE_HD static V Pow2(I e) {
    return BitsToFloat(static_cast<uint32_t>(e + 127) << 23);
  }
  TRACE_HD static V MaxStep(V mx, V v) {
    return v > mx ? v : mx;
  }
  TRACE_HD static V Exp(V x);  // below
};

// ---- ggml's K-quants: super-blocks of 256 weights (docs/numerics.md, "Quantized weights") ----
// Q4_K and Q5_K: per sub-block j of 32 weights a 6-bit scale sc and a 6-bit min m under the
// block's f16 `d` and `dmin`; the weight is d*sc * q - dmin*m. d*sc and dmin*m are exact
// (11-bit x 6-bit), and so is d*sc * q (q < 32: at most 22 bits), so the one rounding is the
// subtraction: (d*sc * q) - dmin*m equals fma(d*sc, q, -dmin*m) and ggml's `d1 * q - m1`,
// contracted or not. (Written as a multiply and a subtraction, which every compiler vectorises
// without an fma instruction.)
// Q6_K: per sub-block of 16 an int8 scale sc under the block's f16 d; the weight d*sc * q
// (q in [-32, 31]) is exact (at most 23 bits). So a K-quant weight is a function of its bytes
// alone, the same on every machine, whatever the order its row is dequantized in.
inline constexpr int kKQuantBlockElems = 256;

// One K-quant weight from its sub-block's scale (d*sc, exact) and, for Q4_K / Q5_K, min
// (dmin*m, exact) and its integer q as f32: (scale * q) - min, the product exact, one rounding
// (affine); Q6_K: scale * (q - 32), exact (symmetric). Every path's dequantization of every
// layout computes through these two.
template <class A = Scalar>
TRACE_HD typename A::V KQuantAffineWeight(typename A::V scale, typename A::V q, typename A::V min) {
  return A::Sub(A::Mul(scale, q), min);
}
template <class A = Scalar>
TRACE_HD typename A::V KQuantSymmetricWeight(typename A::V scale, typename A::V q_minus_32) {
  return A::Mul(scale, q_minus_32);
}

// Q4_1 / Q5_1 (above): d * q + m from d and m as f32 (exact conversions of their f16 bits).
template <class A = Scalar>
TRACE_HD typename A::V AffineBlock32Weight(typename A::V d, typename A::V q, typename A::V m) {
  return A::Add(A::Mul(d, q), m);
}
TRACE_HD float AffineBlockWeight(uint16_t scale_f16, uint16_t min_f16, int q) {
  return AffineBlock32Weight(F16ToF32(scale_f16), static_cast<float>(q), F16ToF32(min_f16));
}

// Sub-block j's (0..7) scale and min from Q4_K / Q5_K's 12 packed bytes (ggml's
// get_scale_min_k4): j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split between the
// nibbles of byte j + 4 and the top 2 bits of bytes j - 4 and j.
TRACE_HD void KQuantScaleMin(const uint8_t* packed, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = packed[j] & 63;
    *m = packed[j + 4] & 63;
  } else {
    *sc = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    *m = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q4_K / Q5_K into out[256]: elements 64i .. 64i + 31 are the low nibbles of qs[32i .. 32i + 31]
// (sub-block 2i), the next 32 their high nibbles (sub-block 2i + 1); Q5_K (qh non-null) adds
// 16 where bit (2i + half) of qh[l] is set.
TRACE_HD void DequantizeAffineKQuant(const uint8_t* block, const uint8_t* qh, const uint8_t* qs,
                                     float* out) {
  const float d = F16ToF32(static_cast<uint16_t>(block[0] | (block[1] << 8)));
  const float dmin = F16ToF32(static_cast<uint16_t>(block[2] | (block[3] << 8)));
  const uint8_t* scales = block + 4;
  for (int i = 0; i < 4; ++i) {
    for (int half = 0; half < 2; ++half) {
      int sc, m;
      KQuantScaleMin(scales, 2 * i + half, &sc, &m);
      const float scale = Scalar::Mul(d, static_cast<float>(sc));
      const float min = Scalar::Mul(dmin, static_cast<float>(m));
      for (int l = 0; l < 32; ++l) {
        int q = (qs[32 * i + l] >> (4 * half)) & 0xF;
        if (qh != nullptr) q += ((qh[l] >> (2 * i + half)) & 1) << 4;
        out[64 * i + 32 * half + l] = KQuantAffineWeight(scale, static_cast<float>(q), min);
      }
    }
  }
}
// Q4_K: 144 bytes: d, dmin, 12 scale bytes, 128 bytes of nibbles.
TRACE_HD void DequantizeQ4_K(const uint8_t* block, float* out) {
  DequantizeAffineKQuant(block, nullptr, block + 16, out);
}
// Q5_K: 176 bytes: d, dmin, 12 scale bytes, 32 bytes of fifth bits qh, 128 bytes of nibbles.
TRACE_HD void DequantizeQ5_K(const uint8_t* block, float* out) {
  DequantizeAffineKQuant(block, block + 16, block + 48, out);
}

// Q6_K (210 bytes: 128 bytes of low nibbles ql, 64 bytes of 2-bit highs qh, 16 int8 scales,
// d): in each half of 128 (ql += 64, qh += 32, scales += 8), for l < 32 the four weights
// l, l + 32, l + 64, l + 96 take ql[l] & 15, ql[l + 32] & 15, ql[l] >> 4, ql[l + 32] >> 4 with
// bits 0-1, 2-3, 4-5, 6-7 of qh[l] on top, minus 32, under scales l / 16 + 0, 2, 4, 6.
TRACE_HD void DequantizeQ6_K(const uint8_t* block, float* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = F16ToF32(static_cast<uint16_t>(block[208] | (block[209] << 8)));
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 4; ++r) {  // weights 128h + 32r + l: sub-blocks 8h + 2r and 8h + 2r + 1
      const uint8_t* low = ql + 64 * h + 32 * (r % 2);
      const int shift = r < 2 ? 0 : 4;
      for (int s16 = 0; s16 < 2; ++s16) {
        const float scale = Scalar::Mul(d, static_cast<float>(scales[8 * h + 2 * r + s16]));
        for (int l = 16 * s16; l < 16 * s16 + 16; ++l) {
          const int q = ((low[l] >> shift) & 0xF) | (((qh[32 * h + l] >> (2 * r)) & 3) << 4);
          out[128 * h + 32 * r + l] = KQuantSymmetricWeight(scale, static_cast<float>(q - 32));
        }
      }
    }
  }
}

// Free-function spelling of the scalar operations, for readable scalar code.
TRACE_HD float Fma(float a, float b, float c) {
  return Scalar::Fma(a, b, c);
}
TRACE_HD float Add(float a, float b) {
  return Scalar::Add(a, b);
}
TRACE_HD float Sub(float a, float b) {
  return Scalar::Sub(a, b);
}
TRACE_HD float Mul(float a, float b) {
  return Scalar::Mul(a, b);
}
TRACE_HD float Div(float a, float b) {
  return Scalar::Div(a, b);
}
TRACE_HD float Sqrt(float a) {
  return Scalar::Sqrt(a);
}

// ---- Exp (section 4) -----------------------------------------------------------------------
inline constexpr float kExpOverflowAbove = 0x1.62e42ep+6f;  // exp(x) > FLT_MAX above this
inline constexpr float kExpZeroBelow = -0x1.ap+6f;          // -104: exp(x) < 2^-150 below
inline constexpr float kLog2e = 0x1.715476p+0f;
// Adding then subtracting 1.5 * 2^23 rounds |t| < 2^22 to an integer, ties to even (only the
// sign of a zero k can differ from nearbyint, which changes no later bit).
inline constexpr float kRoundMagic = 0x1.8p+23f;
inline constexpr float kMinusLn2Hi = -0x1.62e430p-1f;
inline constexpr float kMinusLn2Lo = 0x1.05c610p-29f;
// Taylor coefficients 1/7! .. 1/0!, Horner order.
inline constexpr float kExpC7 = 0x1.a01a02p-13f;
inline constexpr float kExpC6 = 0x1.6c16c2p-10f;
inline constexpr float kExpC5 = 0x1.111112p-7f;
inline constexpr float kExpC4 = 0x1.555556p-5f;
inline constexpr float kExpC3 = 0x1.555556p-3f;
inline constexpr float kExpC2 = 0x1.0p-1f;
inline constexpr float kExpC1 = 0x1.0p+0f;
inline constexpr float kExpC0 = 0x1.0p+0f;

// exp(x) for x in [kExpZeroBelow, kExpOverflowAbove]: k = roundeven(x * log2e);
// r = x - k ln2 in two fma steps (Cody-Waite); p = degree-7 Taylor polynomial of exp(r) by
// Horner with fma; the result p * 2^k as (p * 2^k1) * 2^k2 with k1 = floor(k / 2), k2 = k - k1
// (both factors normal for k in [-150, 128]: the first product is exact, the second rounds
// once, into the subnormal range when the result is subnormal).
template <class A>
TRACE_HD typename A::V ExpCore(typename A::V x) {
  using V = typename A::V;
  using I = typename A::I;
  const V t = A::Mul(x, A::Set1(kLog2e));
  const V k = A::Sub(A::Add(t, A::Set1(kRoundMagic)), A::Set1(kRoundMagic));
  V r = A::Fma(k, A::Set1(kMinusLn2Hi), x);
  r = A::Fma(k, A::Set1(kMinusLn2Lo), r);
  V p = A::Set1(kExpC7);
  p = A::Fma(p, r, A::Set1(kExpC6));
  p = A::Fma(p, r, A::Set1(kExpC5));
  p = A::Fma(p, r, A::Set1(kExpC4));
  p = A::Fma(p, r, A::Set1(kExpC3));
  p = A::Fma(p, r, A::Set1(kExpC2));
  p = A::Fma(p, r, A::Set1(kExpC1));
  p = A::Fma(p, r, A::Set1(kExpC0));
  const I ki = A::ToInt(k);
  const I k1 = A::HalfFloor(ki);
  const I k2 = A::SubInt(ki, k1);
  return A::Mul(A::Mul(p, A::Pow2(k1)), A::Pow2(k2));
}

// The engine's exp: NaN -> NaN (the same NaN), above kExpOverflowAbove -> +inf, below
// kExpZeroBelow -> +0, else ExpCore. A SIMD Exp computes ExpCore on every element and
// blends these three cases in afterwards (in this order: overflow, zero, NaN).
TRACE_HD float Exp(float x) {
  if (IsNan(x)) return x;
  if (x > kExpOverflowAbove) return PlusInfinity();
  if (x < kExpZeroBelow) return 0.0f;
  return ExpCore<Scalar>(x);
}
TRACE_HD float Scalar::Exp(float x) {
  return canonical::Exp(x);
}

// ---- elementwise ops (section 5) -----------------------------------------------------------
// silu(g) = g / (1 + Exp(-g)): negate (exact), Exp, add, divide.
template <class A = Scalar>
TRACE_HD typename A::V Silu(typename A::V g) {
  return A::Div(g, A::Add(A::Set1(1.0f), A::Exp(A::Neg(g))));
}
// SiluMul: silu(gate) * up, one more rounded multiply.
template <class A = Scalar>
TRACE_HD typename A::V SiluMul(typename A::V gate, typename A::V up) {
  return A::Mul(Silu<A>(gate), up);
}

// GeLU with the tanh approximation (transformers' gelu_pytorch_tanh, Gemma's MLP):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = x / (1 + Exp(-t)),
//   t = kGeluTanhScale2 * (x + kGeluTanhCubic * ((x * x) * x)),
// using 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), so no tanh and no cancellation near -1: the
// cube (two rounded multiplies), a rounded multiply and add, a rounded multiply by
// 2 sqrt(2/pi), then the same exact negation, Exp, add and divide as Silu.
inline constexpr float kGeluTanhCubic = 0.044715f;
inline constexpr float kGeluTanhScale2 = 0x1.988454p+0f;  // 2 sqrt(2/pi), rounded to f32
template <class A = Scalar>
TRACE_HD typename A::V GeluTanh(typename A::V x) {
  const typename A::V cube = A::Mul(A::Mul(x, x), x);
  const typename A::V inner = A::Add(x, A::Mul(A::Set1(kGeluTanhCubic), cube));
  const typename A::V t = A::Mul(A::Set1(kGeluTanhScale2), inner);
  return A::Div(x, A::Add(A::Set1(1.0f), A::Exp(A::Neg(t))));
}
// GeluTanhMul: gelu_tanh(gate) * up (GeGLU), one more rounded multiply.
template <class A = Scalar>
TRACE_HD typename A::V GeluTanhMul(typename A::V gate, typename A::V up) {
  return A::Mul(GeluTanh<A>(gate), up);
}

// tanh(y) = sign(y) (1 - e) / (1 + e), e = Exp(-2 |y|) (|y| and the doubling exact; a rounded
// subtract, add and divide); NaN stays NaN, +-inf gives +-1.
TRACE_HD float Tanh(float y) {
  if (IsNan(y)) return y;
  const float a = y < 0.0f ? -y : y;
  const float e = Exp(-(a + a));
  const float t = Div(Sub(1.0f, e), Add(1.0f, e));
  return y < 0.0f ? -t : t;
}
// Logit soft-capping (Gemma's final_logit_softcapping): cap * tanh(x / cap), a rounded divide,
// Tanh, a rounded multiply.
TRACE_HD float SoftCap(float x, float cap) {
  return Mul(Tanh(Div(x, cap)), cap);
}

// Gemma's RMSNorm weights are stored as w - 1: the weight the norm multiplies by is
// 1 + w (one rounded add, as transformers' Gemma3RMSNorm computes it in f32), made once when
// the model loads.
TRACE_HD float UnitOffsetNormWeight(float stored) {
  return Add(1.0f, stored);
}

// RoPE, rotate-half: y1 = x1*c - x2*s, y2 = x2*c + x1*s (two rounded products, then the
// rounded subtract / add; no fma).
template <class A = Scalar>
TRACE_HD void RopeRotate(typename A::V x1, typename A::V x2, typename A::V c, typename A::V s,
                         typename A::V* y1, typename A::V* y2) {
  *y1 = A::Sub(A::Mul(x1, c), A::Mul(x2, s));
  *y2 = A::Add(A::Mul(x2, c), A::Mul(x1, s));
}

// RmsNorm: inv = 1 / sqrt(sum_sq / n + eps) (divide, add, sqrt, divide: four roundings; never
// rsqrt), then out = (x * inv) * w.
TRACE_HD float RmsInverse(float sum_sq, int64_t n, float eps) {
  return Div(1.0f, Sqrt(Add(Div(sum_sq, static_cast<float>(n)), eps)));
}
template <class A = Scalar>
TRACE_HD typename A::V RmsScale(typename A::V x, typename A::V inv, typename A::V w) {
  return A::Mul(A::Mul(x, inv), w);
}

// MatMul: the bias is one rounded add after the whole dot.
template <class A = Scalar>
TRACE_HD typename A::V AddBias(typename A::V dot, typename A::V bias) {
  return A::Add(dot, bias);
}

// ---- the max and its NaN rule (section 5, Attention) --------------------------------------
// The exact max of a sequence v[0..n): start from MaxStart(), MaxStep over the elements in
// ANY order or grouping (partial maxima combine with MaxStep too), then MaxFinish(mx, v[0]).
// MaxStep skips NaN elements; MaxFinish makes a NaN first element the result, which is what
// the sequential `mx = v[0]; if (v[j] > mx) mx = v[j]` of the reference gives. The order can
// differ only in the sign of a zero maximum, and Exp(s - (+0)) == Exp(s - (-0)).
TRACE_HD float MaxStart() {
  return MinusInfinity();
}
template <class A = Scalar>
TRACE_HD typename A::V MaxStep(typename A::V mx, typename A::V v) {
  return A::MaxStep(mx, v);
}
TRACE_HD float MaxFinish(float mx, float first) {
  return IsNan(first) ? first : mx;
}
TRACE_HD float Max(const float* v, int64_t n) {
  float mx = MaxStart();
  for (int64_t j = 0; j < n; ++j) mx = MaxStep(mx, v[j]);
  return n > 0 ? MaxFinish(mx, v[0]) : mx;
}

// Attention: scale = 1 / sqrtf(head_dim) (or of query_pre_attn_scalar, Gemma); score = dot * scale;
// p = Exp(score - max); out = (weighted sum) / (sum of p).
TRACE_HD float AttentionScale(int64_t scale_dim) {
  return Div(1.0f, Sqrt(static_cast<float>(scale_dim)));
}
template <class A = Scalar>
TRACE_HD typename A::V ScaleScore(typename A::V dot, typename A::V scale) {
  return A::Mul(dot, scale);
}
template <class A = Scalar>
TRACE_HD typename A::V Probability(typename A::V score, typename A::V mx) {
  return A::Exp(A::Sub(score, mx));
}
template <class A = Scalar>
TRACE_HD typename A::V Normalize(typename A::V weighted, typename A::V sum) {
  return A::Div(weighted, sum);
}

// ---- the canonical dot product and sum (section 3) -----------------------------------------
// One step of a lane's chain: acc = fma(a, b, acc) (dot) or acc = acc + a (sum).
template <class A = Scalar>
TRACE_HD typename A::V ChainStep(typename A::V acc, typename A::V a, typename A::V b) {
  return A::Fma(a, b, acc);
}
template <class A = Scalar>
TRACE_HD typename A::V SumStep(typename A::V acc, typename A::V a) {
  return A::Add(acc, a);
}
// One step of the final left fold ((lane0 + lane1) + lane2) + ... + lane31.
template <class A = Scalar>
TRACE_HD typename A::V FoldStep(typename A::V total, typename A::V lane_value) {
  return A::Add(total, lane_value);
}
// The whole fold of lanes[0], lanes[stride], ..., lanes[31 * stride], always all 32 (a lane
// that got no block holds +0.0f: it matters for the sign of a zero result).
// (P: a pointer to A::V, or a CUDA body's checked pointer on the host: host_block.h.)
template <class A = Scalar, class P = const typename A::V*>
TRACE_HD typename A::V FoldLanes(P lanes, int64_t stride = 1) {
  typename A::V total = lanes[0];
  for (int l = 1; l < kLanes; ++l) total = FoldStep<A>(total, lanes[l * stride]);
  return total;
}

// Lane `lane`'s chain of the dot of a and b (length n; element k at a[k * a_stride] and
// b[k * b_stride]): from +0.0f over blocks lane, lane + 32, ... in increasing k.
// (PA, PB: pointers to float, or a CUDA body's checked pointers on the host.)
template <class PA = const float*, class PB = const float*>
TRACE_HD float LanePartialDot(PA a, PB b, int64_t n, int lane, int64_t a_stride = 1,
                              int64_t b_stride = 1) {
  float acc = 0.0f;
  const int64_t blocks = NumBlocks(n);
  for (int64_t blk = lane; blk < blocks; blk += kLanes) {
    const int64_t end = BlockEnd(blk, n);
    for (int64_t k = BlockBegin(blk); k < end; ++k) {
      acc = ChainStep(acc, a[k * a_stride], b[k * b_stride]);
    }
  }
  return acc;
}
// The same for the sum of a.
template <class P = const float*>
TRACE_HD float LanePartialSum(P a, int64_t n, int lane) {
  float acc = 0.0f;
  const int64_t blocks = NumBlocks(n);
  for (int64_t blk = lane; blk < blocks; blk += kLanes) {
    const int64_t end = BlockEnd(blk, n);
    for (int64_t k = BlockBegin(blk); k < end; ++k) acc = SumStep(acc, a[k]);
  }
  return acc;
}

// Continues the 32 lane chains lanes[0..31] with the elements [begin, n) of the dot of a and
// b: the scalar tail of a SIMD path that has already run every element before `begin` (so
// each chain stays in increasing k).
TRACE_HD void DotTail(float* lanes, const float* a, const float* b, int64_t begin, int64_t n) {
  for (int64_t k = begin; k < n; ++k) {
    const int l = LaneOfElement(k);
    lanes[l] = ChainStep(lanes[l], a[k], b[k]);
  }
}

// CanonicalDot / CanonicalSum of kernels/kernels.h: lane 0's chain, then each next lane's
// chain folded in (lane by lane, so no array of 32 partials is needed: on a GPU thread that
// keeps everything in registers).
TRACE_HD float Dot(const float* a, const float* b, int64_t n) {
  float total = LanePartialDot(a, b, n, 0);
  for (int l = 1; l < kLanes; ++l) total = FoldStep(total, LanePartialDot(a, b, n, l));
  return total;
}
TRACE_HD float Sum(const float* a, int64_t n) {
  float total = LanePartialSum(a, n, 0);
  for (int l = 1; l < kLanes; ++l) total = FoldStep(total, LanePartialSum(a, n, l));
  return total;
}

// ---- mixture-of-experts routing (section 5, "MoE routing") ----------------------------------
// Whether expert a (probability pa) ranks before expert b in the top-k: probability
// descending, then expert id ascending; a NaN probability ranks after every number (and NaNs
// among themselves by id), so the order is total and never depends on the scan order.
TRACE_HD bool RanksBefore(float pa, int32_t a, float pb, int32_t b) {
  if (IsNan(pa) || IsNan(pb)) {
    if (IsNan(pa) && IsNan(pb)) return a < b;
    return IsNan(pb);
  }
  if (pa != pb) return pa > pb;
  return a < b;
}

// The route of one row: the softmax of the router logits (logits[0..E)) by the contract,
//   mx = Max(logits); p[e] = Exp(logits[e] - mx); sum = Sum(p, E); prob[e] = p[e] / sum,
// the top k experts by RanksBefore, written to ids[0..k) in ascending expert id, and their
// weights[j] = prob[ids[j]], or with `normalize` prob[ids[j]] / Sum(those k probabilities in
// ascending id order, k elements). `probs` is caller scratch of E floats. Selection is k
// scans of the E experts (k * E comparisons); no capacity, nothing dropped.
TRACE_HD void RouteRow(const float* logits, int64_t E, int64_t k, bool normalize, float* probs,
                       int32_t* ids, float* weights) {
  const float mx = Max(logits, E);
  for (int64_t e = 0; e < E; ++e) probs[e] = Probability(logits[e], mx);
  const float sum = Sum(probs, E);
  for (int64_t e = 0; e < E; ++e) probs[e] = Normalize(probs[e], sum);
  for (int64_t j = 0; j < k; ++j) {  // the j-th best among those not yet taken
    int32_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      bool taken = false;
      for (int64_t t = 0; t < j; ++t) taken = taken || ids[t] == static_cast<int32_t>(e);
      if (taken) continue;
      if (best < 0 || RanksBefore(probs[e], static_cast<int32_t>(e), probs[best], best)) {
        best = static_cast<int32_t>(e);
      }
    }
    ids[j] = best;
  }
  for (int64_t j = 1; j < k; ++j) {  // ascending expert id (insertion sort; k is small)
    const int32_t id = ids[j];
    int64_t t = j;
    for (; t > 0 && ids[t - 1] > id; --t) ids[t] = ids[t - 1];
    ids[t] = id;
  }
  for (int64_t j = 0; j < k; ++j) weights[j] = probs[ids[j]];
  if (normalize) {
    const float total = Sum(weights, k);
    for (int64_t j = 0; j < k; ++j) weights[j] = Div(weights[j], total);
  }
}

// One step of the combine of a row's expert outputs, in ascending expert id from acc = +0.0f:
// acc = acc + weight * y (a rounded multiply, then a rounded add; no fma).
template <class A = Scalar>
TRACE_HD typename A::V CombineStep(typename A::V acc, typename A::V weight, typename A::V y) {
  return A::Add(acc, A::Mul(weight, y));
}

// qwen2_moe's shared expert: its weight is the sigmoid of its gate logit (a dot of the row
// with the [1, hidden] shared_expert_gate, by the canonical MatMul),
//   SharedExpertWeight(x) = 1 / (1 + Exp(-x))   (exact negation, Exp, rounded add, divide),
// and its term is added after the routed experts' sum, as one more CombineStep:
//   out = CombineStep(routed sum, SharedExpertWeight(gate logit), shared expert's output).
// (Hugging Face: final = routed + sigmoid(shared_expert_gate(h)) * shared_expert(h).)
TRACE_HD float SharedExpertWeight(float gate_logit) {
  return Div(1.0f, Add(1.0f, Exp(-gate_logit)));
}

}  // namespace trace::kernels::canonical
