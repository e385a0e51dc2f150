// ggml's K-quants (Q4_K, Q5_K, Q6_K) for tests, written from the format's description
// (ggml-common.h's block structs and the dequantization they define), independently of
// kernels/canonical.h: a quantizer that makes valid blocks from f32 values, and a dequantizer
// that computes each weight in double (every product exact there) and rounds it to f32 once,
// which is the value the contract defines. Header-only, no dependencies beyond the standard
// library.
//
//   block_q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128];}            144 bytes
//   block_q5_K {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128];} 176 bytes
//   block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d;}            210 bytes
//
// Q4_K / Q5_K: 8 sub-blocks of 32, each with a 6-bit scale sc_j and min m_j packed in scales[12]
// (sub-block j < 4: bits 0-5 of bytes j and j + 4; j >= 4: the nibbles of byte j + 4 for the low
// bits and bits 6-7 of bytes j - 4 and j for the high ones); weight = d*sc_j*q - dmin*m_j, q the
// 4-bit value (element 64i + l: low nibble of qs[32i + l]; 64i + 32 + l: its high nibble) plus,
// for Q5_K, 16 times bit (2i + half) of qh[l]. Q6_K: 16 sub-blocks of 16 with int8 scales;
// weight = d*scales[e / 16]*(q - 32), q 6 bits: element 128h + 32r + l (l < 32) has its low 4
// bits in ql[64h + l + 32(r % 2)] (low nibble for r < 2, high for r >= 2) and its high 2 bits
// in bits 2r, 2r + 1 of qh[32h + l].
//
// Ownership: values. Thread safety: pure functions. Errors: none (sizes are the caller's).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace trace::testkit {

enum class KQuant { kQ4_K, kQ5_K, kQ6_K };

inline size_t KQuantBlockBytes(KQuant type) {
  return type == KQuant::kQ4_K ? 144 : type == KQuant::kQ5_K ? 176 : 210;
}

namespace kquant_detail {

// IEEE half <-> float, round to nearest even (the test's own conversion).
inline float HalfToFloat(uint16_t h) {
  const int exponent = (h >> 10) & 31, mantissa = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa, -24));
  if (exponent == 31) return mantissa ? NAN : static_cast<float>(sign * INFINITY);
  return static_cast<float>(sign * std::ldexp(1024 + mantissa, exponent - 25));
}
// A non-negative finite f below 65504 as the nearest half, ties to even (nearbyint's default
// rounding); the scales here are small positive numbers.
inline uint16_t FloatToHalf(float f) {
  if (!(f > 0)) return 0;
  int e;
  std::frexp(f, &e);  // f in [2^(e-1), 2^e)
  int exponent = e - 1;
  if (exponent < -14) {  // subnormal: units of 2^-24 (1024 of them is the smallest normal)
    return static_cast<uint16_t>(std::nearbyint(std::ldexp(static_cast<double>(f), 24)));
  }
  double mantissa = std::nearbyint(std::ldexp(static_cast<double>(f), 10 - exponent));
  if (mantissa == 2048) {
    mantissa = 1024;
    ++exponent;
  }
  return static_cast<uint16_t>(((exponent + 15) << 10) | (static_cast<int>(mantissa) - 1024));
}

inline void PutHalf(std::string* out, size_t at, uint16_t h) {
  (*out)[at] = static_cast<char>(h & 0xff);
  (*out)[at + 1] = static_cast<char>(h >> 8);
}
inline uint16_t GetHalf(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// Sub-block j's 6-bit (scale, min) from the 12 packed bytes.
inline void ScaleMin(const uint8_t* packed, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = packed[j] & 63;
    *m = packed[j + 4] & 63;
  } else {
    *sc = (packed[j + 4] & 15) | ((packed[j - 4] >> 6) << 4);
    *m = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

}  // namespace kquant_detail

// The 256 weights of one block, each computed exactly in double and rounded to f32 once.
inline std::vector<float> DequantizeKQuantBlock(KQuant type, const uint8_t* b) {
  using namespace kquant_detail;
  std::vector<float> out(256);
  if (type == KQuant::kQ6_K) {
    const double d = HalfToFloat(GetHalf(b + 208));
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = (e % 128) / 32, l = e % 32;
      const uint8_t low_byte = b[64 * h + l + 32 * (r % 2)];
      const int low = r < 2 ? low_byte & 15 : low_byte >> 4;
      const int high = (b[128 + 32 * h + l] >> (2 * r)) & 3;
      const int scale = static_cast<int8_t>(b[192 + e / 16]);
      out[e] = static_cast<float>(d * scale * ((low | (high << 4)) - 32));
    }
    return out;
  }
  const double d = HalfToFloat(GetHalf(b)), dmin = HalfToFloat(GetHalf(b + 2));
  const uint8_t* qs = b + (type == KQuant::kQ5_K ? 48 : 16);
  for (int e = 0; e < 256; ++e) {
    const int i = e / 64, half = (e % 64) / 32, l = e % 32;
    int sc, m;
    ScaleMin(b + 4, 2 * i + half, &sc, &m);
    int q = half == 0 ? qs[32 * i + l] & 15 : qs[32 * i + l] >> 4;
    if (type == KQuant::kQ5_K) q += ((b[16 + l] >> (2 * i + half)) & 1) << 4;
    out[e] = static_cast<float>(d * sc * q - dmin * m);
  }
  return out;
}

// Valid blocks for the values `x` (a multiple of 256 of them), by a plain min/max rule (not
// ggml's search for the best scales: any valid block serves a test of the arithmetic).
inline std::string QuantizeKQuant(KQuant type, const std::vector<float>& x) {
  using namespace kquant_detail;
  std::string out;
  for (size_t base = 0; base < x.size(); base += 256) {
    const float* v = x.data() + base;
    std::string block(KQuantBlockBytes(type), '\0');
    if (type == KQuant::kQ6_K) {
      float scale[16];
      float max_scale = 0;
      for (int s = 0; s < 16; ++s) {
        float amax = 0;
        for (int k = 0; k < 16; ++k) amax = std::max(amax, std::fabs(v[16 * s + k]));
        scale[s] = amax / 31.0f;
        max_scale = std::max(max_scale, scale[s]);
      }
      const uint16_t d16 = FloatToHalf(max_scale / 127.0f);
      const double d = HalfToFloat(d16);
      PutHalf(&block, 208, d16);
      int q[256];
      for (int s = 0; s < 16; ++s) {
        const int sc =
            d > 0 ? std::clamp(static_cast<int>(std::lround(scale[s] / d)), -128, 127) : 0;
        block[192 + s] = static_cast<char>(static_cast<int8_t>(sc));
        for (int k = 0; k < 16; ++k) {
          const double step = d * sc;
          const int value = step != 0 ? static_cast<int>(std::lround(v[16 * s + k] / step)) : 0;
          q[16 * s + k] = std::clamp(value, -32, 31) + 32;
        }
      }
      for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 32; ++l) {
          const int* Q = q + 128 * h;
          block[64 * h + l] = static_cast<char>((Q[l] & 15) | ((Q[64 + l] & 15) << 4));
          block[64 * h + l + 32] = static_cast<char>((Q[32 + l] & 15) | ((Q[96 + l] & 15) << 4));
          block[128 + 32 * h + l] =
              static_cast<char>((Q[l] >> 4) | ((Q[32 + l] >> 4) << 2) | ((Q[64 + l] >> 4) << 4) |
                                ((Q[96 + l] >> 4) << 6));
        }
      }
      out += block;
      continue;
    }
    const int levels = type == KQuant::kQ5_K ? 31 : 15;
    float scale[8], min[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = 0;
      for (int k = 0; k < 32; ++k) {
        lo = std::min(lo, v[32 * j + k]);
        hi = std::max(hi, v[32 * j + k]);
      }
      scale[j] = (hi - lo) / static_cast<float>(levels);
      min[j] = -lo;
      max_scale = std::max(max_scale, scale[j]);
      max_min = std::max(max_min, min[j]);
    }
    const uint16_t d16 = FloatToHalf(max_scale / 63.0f), dmin16 = FloatToHalf(max_min / 63.0f);
    const double d = HalfToFloat(d16), dmin = HalfToFloat(dmin16);
    PutHalf(&block, 0, d16);
    PutHalf(&block, 2, dmin16);
    int sc[8], m[8], q[256];
    for (int j = 0; j < 8; ++j) {
      sc[j] = d > 0 ? std::clamp(static_cast<int>(std::lround(scale[j] / d)), 0, 63) : 0;
      m[j] = dmin > 0 ? std::clamp(static_cast<int>(std::lround(min[j] / dmin)), 0, 63) : 0;
      for (int k = 0; k < 32; ++k) {
        const double step = d * sc[j];
        const double value = step != 0 ? (v[32 * j + k] + dmin * m[j]) / step : 0;
        q[32 * j + k] = std::clamp(static_cast<int>(std::lround(value)), 0, levels);
      }
    }
    for (int i = 0; i < 4; ++i) {
      block[4 + i] = static_cast<char>(sc[i] | ((sc[i + 4] >> 4) << 6));
      block[4 + i + 4] = static_cast<char>(m[i] | ((m[i + 4] >> 4) << 6));
      block[4 + i + 8] = static_cast<char>((sc[i + 4] & 15) | ((m[i + 4] & 15) << 4));
    }
    const size_t qs = type == KQuant::kQ5_K ? 48 : 16;
    for (int i = 0; i < 4; ++i) {
      for (int l = 0; l < 32; ++l) {
        const int a = q[64 * i + l], b = q[64 * i + 32 + l];
        block[qs + 32 * i + l] = static_cast<char>((a & 15) | ((b & 15) << 4));
        if (type == KQuant::kQ5_K) {
          block[16 + l] = static_cast<char>(static_cast<uint8_t>(block[16 + l]) |
                                            ((a >> 4) << (2 * i)) | ((b >> 4) << (2 * i + 1)));
        }
      }
    }
    out += block;
  }
  return out;
}

// Every weight of `blocks` (whole blocks of `type`), as DequantizeKQuantBlock gives them.
inline std::vector<float> DequantizeKQuant(KQuant type, const std::string& blocks) {
  std::vector<float> out;
  const size_t bytes = KQuantBlockBytes(type);
  for (size_t at = 0; at + bytes <= blocks.size(); at += bytes) {
    const auto block =
        DequantizeKQuantBlock(type, reinterpret_cast<const uint8_t*>(blocks.data() + at));
    out.insert(out.end(), block.begin(), block.end());
  }
  return out;
}

}  // namespace trace::testkit
