// The kInterleaved32 records of the nibble types (K-quants, Q4_1, Q5_1): their writer and their
// scalar reader (the reference
// path's, NEON's and fast numerics' row conversion). Layout: kernels/kquant_interleaved.h.
#include "kernels/kquant_interleaved.h"

#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstring>

namespace trace::kernels::kquant {
namespace {

// One row's super-block as integers: the f16 bits of d and dmin, per sub-block of 32 the two
// scale bytes of the record, and q for every element (Q6_K: 0..63).
struct Unpacked {
  uint16_t d = 0, dmin = 0;
  uint8_t sc[kSubBlocks] = {}, m[kSubBlocks] = {};
  uint8_t q[kKQuantBlockElems] = {};
};

uint16_t F16At(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// ggml's Q4_K / Q5_K (canonical::DequantizeAffineKQuant has the element order).
void UnpackAffine(const uint8_t* block, bool has_fifth_bit, Unpacked* u) {
  u->d = F16At(block);
  u->dmin = F16At(block + 2);
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + (has_fifth_bit ? 48 : 16);
  for (int j = 0; j < kSubBlocks; ++j) {
    int sc, m;
    canonical::KQuantScaleMin(block + 4, j, &sc, &m);
    u->sc[j] = static_cast<uint8_t>(sc);
    u->m[j] = static_cast<uint8_t>(m);
  }
  for (int i = 0; i < 4; ++i) {
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 32; ++l) {
        int q = (qs[32 * i + l] >> (4 * half)) & 0xF;
        if (has_fifth_bit) q |= ((qh[l] >> (2 * i + half)) & 1) << 4;
        u->q[64 * i + 32 * half + l] = static_cast<uint8_t>(q);
      }
    }
  }
}

// ggml's Q6_K (canonical::DequantizeQ6_K has the element order): sub-block j of 32 is the
// file's sub-blocks 2j and 2j + 1 of 16.
void UnpackQ6(const uint8_t* block, Unpacked* u) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  u->d = F16At(block + 208);
  for (int j = 0; j < kSubBlocks; ++j) {
    u->sc[j] = block[192 + 2 * j];
    u->m[j] = block[192 + 2 * j + 1];
  }
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 4; ++r) {
      const uint8_t* low = ql + 64 * h + 32 * (r % 2);
      for (int l = 0; l < 32; ++l) {
        const int q =
            ((low[l] >> (r < 2 ? 0 : 4)) & 0xF) | (((qh[32 * h + l] >> (2 * r)) & 3) << 4);
        u->q[128 * h + 32 * r + l] = static_cast<uint8_t>(q);
      }
    }
  }
}

void Unpack(DType dtype, const uint8_t* block, Unpacked* u) {
  if (dtype == DType::kQ6_K) return UnpackQ6(block, u);
  UnpackAffine(block, dtype == DType::kQ5_K, u);
}

}  // namespace

int64_t InterleavedBytes(const WeightView& w) {
  return (w.rows + 31) / 32 * GroupBytes(w.dtype, w.cols);
}

namespace {

// Writes row r's (0..31) block of 32 q values into a sub-record's nibbles and bit planes.
void WriteQuants(DType dtype, int r, const uint8_t* q, uint8_t* sub) {
  uint8_t* nibbles = sub + ScaleBytes(dtype);
  for (int p = 0; p < 16; ++p) {
    nibbles[p * 32 + r] = static_cast<uint8_t>((q[2 * p] & 0xF) | ((q[2 * p + 1] & 0xF) << 4));
  }
  uint8_t* plane = nibbles + kNibbleBytes;
  for (int b = 0; b < HighPlanes(dtype); ++b) {
    for (int i = 0; i < 32; ++i) {
      if ((q[i] >> (4 + b)) & 1) {
        plane[b * kPlaneBytes + i * 4 + r / 8] |= static_cast<uint8_t>(1u << (r % 8));
      }
    }
  }
}

void InterleaveKQuant(const WeightView& w, uint8_t* out) {
  const int64_t supers = w.cols / kKQuantBlockElems;
  const int64_t block_bytes = BlockBytes(w.dtype);
  for (int64_t n = 0; n < w.rows; ++n) {
    const int r = static_cast<int>(n % 32);
    for (int64_t s = 0; s < supers; ++s) {
      Unpacked u;
      Unpack(w.dtype, static_cast<const uint8_t*>(w.data) + (n * supers + s) * block_bytes, &u);
      uint8_t* record = out + (n / 32) * GroupBytes(w.dtype, w.cols) + s * RecordBytes(w.dtype);
      std::memcpy(record + 2 * r, &u.d, 2);
      std::memcpy(record + 64 + 2 * r, &u.dmin, 2);
      for (int j = 0; j < kSubBlocks; ++j) {
        uint8_t* sub = record + kKQuantHeaderBytes + j * SubRecordBytes(w.dtype);
        sub[r] = u.sc[j];
        sub[32 + r] = u.m[j];
        WriteQuants(w.dtype, r, u.q + 32 * j, sub);
      }
    }
  }
}

// Q4_1 / Q5_1: per block, the rows' d and m (f16 bits) and their q.
void InterleaveAffineBlock32(const WeightView& w, uint8_t* out) {
  const int64_t blocks = w.cols / canonical::kBlockLen;
  for (int64_t n = 0; n < w.rows; ++n) {
    const int r = static_cast<int>(n % 32);
    for (int64_t b = 0; b < blocks; ++b) {
      const QuantBlock block = ReadQuantBlock(w, n, b);
      uint8_t* sub = out + (n / 32) * GroupBytes(w.dtype, w.cols) + b * RecordBytes(w.dtype);
      std::memcpy(sub + 2 * r, &block.scale, 2);
      std::memcpy(sub + 64 + 2 * r, &block.min, 2);
      uint8_t q[32];
      for (int k = 0; k < 32; ++k) q[k] = static_cast<uint8_t>(block.q[k]);
      WriteQuants(w.dtype, r, q, sub);
    }
  }
}

}  // namespace

void Interleave(const WeightView& w, uint8_t* out) {
  if (IsKQuant(w.dtype)) return InterleaveKQuant(w, out);
  InterleaveAffineBlock32(w, out);
}

void InterleavedBlockToF32(const WeightView& w, int64_t row, int64_t block, int elems, float* out) {
  const int r = static_cast<int>(row % 32);
  const uint8_t* group = Group(w, row / 32);
  const uint8_t* record = RecordOfBlock(group, w.dtype, block);
  const uint8_t* sub = SubRecordOfBlock(group, w.dtype, block);
  if (IsAffineBlock32(w.dtype)) {
    const uint16_t d = F16At(sub + 2 * r), m = F16At(sub + 64 + 2 * r);
    for (int i = 0; i < elems; ++i) {
      out[i] = canonical::AffineBlockWeight(d, m, QuantAt(sub, w.dtype, r, i));
    }
    return;
  }
  const float d = canonical::F16ToF32(F16At(record + 2 * r));
  if (w.dtype == DType::kQ6_K) {
    const float lo = canonical::Mul(d, static_cast<float>(static_cast<int8_t>(sub[r])));
    const float hi = canonical::Mul(d, static_cast<float>(static_cast<int8_t>(sub[32 + r])));
    for (int i = 0; i < elems; ++i) {
      const float q = static_cast<float>(QuantAt(sub, w.dtype, r, i) - 32);
      out[i] = canonical::KQuantSymmetricWeight(i < 16 ? lo : hi, q);
    }
    return;
  }
  const float dmin = canonical::F16ToF32(F16At(record + 64 + 2 * r));
  const float scale = canonical::Mul(d, static_cast<float>(sub[r]));
  const float min = canonical::Mul(dmin, static_cast<float>(sub[32 + r]));
  for (int i = 0; i < elems; ++i) {
    out[i] =
        canonical::KQuantAffineWeight(scale, static_cast<float>(QuantAt(sub, w.dtype, r, i)), min);
  }
}

void InterleavedRowToF32(const WeightView& w, int64_t row, int64_t n, float* out) {
  for (int64_t b = 0; b * canonical::kBlockLen < n; ++b) {
    const int64_t begin = b * canonical::kBlockLen;
    const int elems = static_cast<int>(std::min<int64_t>(n - begin, canonical::kBlockLen));
    InterleavedBlockToF32(w, row, b, elems, out + begin);
  }
}

}  // namespace trace::kernels::kquant
