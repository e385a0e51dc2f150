// The kInterleaved32 layout of the K-quants (Q4_K, Q5_K, Q6_K): what InterleaveWeights makes of
// a row-major K-quant matrix so that the SIMD MatMuls read 8 or 16 output rows' quantized
// weights with one load, in one sequential stream, and dequantize them in registers (the
// row-major file layout puts a row's 256 weights together, so vectorising across rows would
// need a gather, and vectorising along a row a transpose per block).
//
// Per group of 32 rows and super-block s of 256 columns, one record of RecordBytes(dtype):
//   [0, 64)     d    f16[32]      the rows' super-block scales (the file's bits)
//   [64, 128)   dmin f16[32]      Q4_K / Q5_K: the rows' super-block mins; Q6_K: zero
//   then per sub-block j = 0..7 (columns 256s + 32j .. + 31: exactly canonical block 8s + j),
//   SubRecordBytes(dtype) bytes:
//   [0, 32)     sc u8[32]         Q4_K / Q5_K: the rows' 6-bit scales; Q6_K: the int8 scale of
//                                 elements 0..15
//   [32, 64)    m  u8[32]         Q4_K / Q5_K: the rows' 6-bit mins; Q6_K: the int8 scale of
//                                 elements 16..31
//   [64, 576)   [16 pairs][32 rows] bytes: row r's q at element 2p in the low nibble, 2p + 1 in
//               the high nibble (q's low four bits)
//   Q5_K, Q6_K: [576, 704) bit 4 of q: [32 elements][4 bytes], row r at bit r % 8 of byte r / 8
//   Q6_K:       [704, 832) bit 5 of q, the same way
// A weight is canonical::KQuantAffineWeight(d*sc, q, dmin*m) (Q4_K, Q5_K) or
// KQuantSymmetricWeight(d*sc, q - 32) (Q6_K): the same values as the file's, so every layout
// gives the same bits. The records are 128 + 8 * (576, 704, 832) bytes for 8192 weights: 2.8%,
// 2.3% and 1.0% more than the file's blocks. Missing rows of the last group are zero (weight 0).
//
// Ownership: none (views of caller memory). Thread safety: reentrant. Errors: none (cols is a
// multiple of 256: the caller's contract, checked when a model loads).
#pragma once

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::kernels::kquant {

inline constexpr int64_t kSubBlocks = 8;
inline constexpr int64_t kHeaderBytes = 128;
inline constexpr int64_t kScaleBytes = 64;
inline constexpr int64_t kNibbleBytes = 512;
inline constexpr int64_t kPlaneBytes = 128;

// Bits of q above the nibble: Q4_K 0, Q5_K 1, Q6_K 2.
constexpr int HighPlanes(DType dtype) {
  return dtype == DType::kQ6_K ? 2 : dtype == DType::kQ5_K ? 1 : 0;
}
constexpr int64_t SubRecordBytes(DType dtype) {
  return kScaleBytes + kNibbleBytes + kPlaneBytes * HighPlanes(dtype);
}
constexpr int64_t RecordBytes(DType dtype) {
  return kHeaderBytes + kSubBlocks * SubRecordBytes(dtype);
}

// The record of rows 32g .. 32g + 31 and super-block s.
inline const uint8_t* Record(const WeightView& w, int64_t group, int64_t super_block) {
  const int64_t supers = w.cols / kKQuantBlockElems;
  return static_cast<const uint8_t*>(w.data) +
         (group * supers + super_block) * RecordBytes(w.dtype);
}
inline const uint8_t* SubRecord(const uint8_t* record, DType dtype, int64_t j) {
  return record + kHeaderBytes + j * SubRecordBytes(dtype);
}

// Row r's (0..31) integer q at element i (0..31) of a sub-record (Q6_K: 0..63, before the 32).
inline int QuantAt(const uint8_t* sub, DType dtype, int r, int i) {
  int q = (sub[kScaleBytes + (i / 2) * 32 + r] >> (4 * (i % 2))) & 0xF;
  const uint8_t* plane = sub + kScaleBytes + kNibbleBytes;
  for (int p = 0; p < HighPlanes(dtype); ++p) {
    q |= ((plane[p * kPlaneBytes + i * 4 + r / 8] >> (r % 8)) & 1) << (4 + p);
  }
  return q;
}

// Bytes of the interleaved copy of `w`: ceil(rows / 32) * cols / 256 records.
int64_t InterleavedBytes(const WeightView& w);
// Writes the records of row-major K-quant `w` to `out` (InterleavedBytes(w), zeroed by the
// caller).
void Interleave(const WeightView& w, uint8_t* out);

// Elements [0, elems) of canonical block `block` (columns 32 * block ..) of row `row` of an
// interleaved K-quant matrix, dequantized.
void InterleavedBlockToF32(const WeightView& w, int64_t row, int64_t block, int elems, float* out);
// Elements [0, n) of row `row` of an interleaved K-quant matrix, dequantized.
void InterleavedRowToF32(const WeightView& w, int64_t row, int64_t n, float* out);

}  // namespace trace::kernels::kquant
