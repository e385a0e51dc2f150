// The kInterleaved32 layout of the nibble types, the K-quants (Q4_K, Q5_K, Q6_K) and ggml's
// affine blocks of 32 (Q4_1, Q5_1): what InterleaveWeights makes of a row-major matrix of them
// so that the SIMD MatMuls read 8 or 16 output rows' quantized weights with one load, in one
// sequential stream, and dequantize them in registers (the row-major file layout puts a row's
// weights together, so vectorising across rows would need a gather, and vectorising along a
// row a transpose per block).
//
// Rows in groups of 32; a group is a run of records, one per BlocksPerRecord(dtype) canonical
// blocks of 32 columns. Every canonical block b of the group has a sub-record of
// SubRecordBytes(dtype) bytes (SubRecordOfBlock):
//   [0, ScaleBytes)   its scales (below)
//   then [16 pairs][32 rows] bytes: row r's q at element 2p in the low nibble, 2p + 1 in the
//   high nibble (q's low four bits); then HighPlanes(dtype) bit planes of 128 bytes, bit 4 (and
//   5) of q: [32 elements][4 bytes], row r at bit r % 8 of byte r / 8.
// K-quants: one record per super-block s of 256 columns: a header
//   [0, 64) d f16[32] (the rows' super-block scales, the file's bits), [64, 128) dmin f16[32]
//   (Q6_K: zero), then the 8 sub-records of blocks 8s .. 8s + 7, whose scales are
//   [0, 32) sc u8[32] (Q4_K / Q5_K: the 6-bit scales; Q6_K: the int8 scale of elements 0..15),
//   [32, 64) m u8[32] (Q4_K / Q5_K: the 6-bit mins; Q6_K: the int8 scale of elements 16..31).
//   Weight: canonical::KQuantAffineWeight(d*sc, q, dmin*m) (Q4_K, Q5_K) or
//   KQuantSymmetricWeight(d*sc, q - 32) (Q6_K). 128 + 8 * (576, 704, 832) bytes for 8192
//   weights: 2.8%, 2.3% and 1.0% more than the file's blocks.
// Q4_1 / Q5_1: one record (no header) per block: scales [0, 64) d f16[32], [64, 128) m f16[32];
//   weight canonical::AffineBlock32Weight(d, q, m). 640 and 768 bytes for 1024 weights: the
//   file's size.
// The values are the file's, so every layout gives the same bits. Missing rows of the last
// group are zero (weight 0).
//
// Ownership: none (views of caller memory). Thread safety: reentrant. Errors: none (cols is a
// multiple of 256, or of 32 for Q4_1 / Q5_1: the caller's contract, checked when a model loads).
#pragma once

#include <cstdint>

#include "kernels/canonical.h"
#include "kernels/kernels.h"

namespace trace::kernels::kquant {

inline constexpr int64_t kSubBlocks = 8;  // canonical blocks per K-quant super-block
inline constexpr int64_t kKQuantHeaderBytes = 128;
inline constexpr int64_t kNibbleBytes = 512;
inline constexpr int64_t kPlaneBytes = 128;

// Whether InterleaveWeights writes `dtype` as records of this file.
constexpr bool UsesRecords(DType dtype) {
  return IsKQuant(dtype) || IsAffineBlock32(dtype);
}
// Bits of q above the nibble: Q4_K, Q4_1 0; Q5_K, Q5_1 1; Q6_K 2.
constexpr int HighPlanes(DType dtype) {
  return dtype == DType::kQ6_K ? 2 : dtype == DType::kQ5_K || dtype == DType::kQ5_1 ? 1 : 0;
}
constexpr int64_t BlocksPerRecord(DType dtype) {
  return IsKQuant(dtype) ? kSubBlocks : 1;
}
constexpr int64_t HeaderBytes(DType dtype) {
  return IsKQuant(dtype) ? kKQuantHeaderBytes : 0;
}
constexpr int64_t ScaleBytes(DType dtype) {
  return IsKQuant(dtype) ? 64 : 128;
}
constexpr int64_t SubRecordBytes(DType dtype) {
  return ScaleBytes(dtype) + kNibbleBytes + kPlaneBytes * HighPlanes(dtype);
}
constexpr int64_t RecordBytes(DType dtype) {
  return HeaderBytes(dtype) + BlocksPerRecord(dtype) * SubRecordBytes(dtype);
}
// Bytes of one group of 32 rows of `cols` columns.
constexpr int64_t GroupBytes(DType dtype, int64_t cols) {
  return cols / canonical::kBlockLen / BlocksPerRecord(dtype) * RecordBytes(dtype);
}

// The record holding canonical block b of the group that starts at `group`, and b's sub-record.
inline const uint8_t* RecordOfBlock(const uint8_t* group, DType dtype, int64_t b) {
  return group + b / BlocksPerRecord(dtype) * RecordBytes(dtype);
}
inline const uint8_t* SubRecordOfBlock(const uint8_t* group, DType dtype, int64_t b) {
  return RecordOfBlock(group, dtype, b) + HeaderBytes(dtype) +
         b % BlocksPerRecord(dtype) * SubRecordBytes(dtype);
}
inline const uint8_t* Group(const WeightView& w, int64_t group) {
  return static_cast<const uint8_t*>(w.data) + group * GroupBytes(w.dtype, w.cols);
}

// Row r's (0..31) integer q at element i (0..31) of a sub-record (Q6_K: 0..63, before the 32).
inline int QuantAt(const uint8_t* sub, DType dtype, int r, int i) {
  const uint8_t* nibbles = sub + ScaleBytes(dtype);
  int q = (nibbles[(i / 2) * 32 + r] >> (4 * (i % 2))) & 0xF;
  const uint8_t* plane = nibbles + kNibbleBytes;
  for (int p = 0; p < HighPlanes(dtype); ++p) {
    q |= ((plane[p * kPlaneBytes + i * 4 + r / 8] >> (r % 8)) & 1) << (4 + p);
  }
  return q;
}

// Bytes of the interleaved copy of `w`: ceil(rows / 32) groups.
int64_t InterleavedBytes(const WeightView& w);
// Writes the records of row-major `w` (UsesRecords) to `out` (InterleavedBytes(w), zeroed by the
// caller).
void Interleave(const WeightView& w, uint8_t* out);

// Elements [0, elems) of canonical block `block` (columns 32 * block ..) of row `row` of an
// interleaved matrix of records, dequantized.
void InterleavedBlockToF32(const WeightView& w, int64_t row, int64_t block, int elems, float* out);
// Elements [0, n) of row `row` of an interleaved matrix of records, dequantized.
void InterleavedRowToF32(const WeightView& w, int64_t row, int64_t n, float* out);

}  // namespace trace::kernels::kquant
