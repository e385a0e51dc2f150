// The shapes the GPU kernel tests (tests/gpu/kernels_gpu_test.cc) run, in one place: the CPU
// simulation of the CUDA schedules (tests/kernels/cuda_schedule_test.cc) runs the very same
// launches on the host, so what the GPU will be asked is checked before a GPU sees it.
// Plain C++ (no CUDA headers): included by both.
//
// Ownership: constants only. Thread safety: immutable. Errors: none.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace trace::gpu_shapes {

struct MatMulShape {
  int64_t M, N, K;
};

// M around the GEMV/GEMM switch (8), K not a multiple of 32 or 1024, N not a multiple of the
// tile sizes; on a 132-SM H200 the last two shapes take the 64x64 and 128x128 GEMM tiles, the
// other GEMM shapes the 64x32 ones.
inline constexpr MatMulShape kMatMul[] = {
    {1, 37, 1},       {1, 64, 31},     {2, 33, 33},      {3, 129, 1000}, {7, 100, 1024},
    {8, 96, 1056},    {9, 77, 1025},   {17, 300, 4097},  {33, 65, 896},  {64, 256, 3072},
    {130, 200, 2080}, {600, 1100, 77}, {1100, 2100, 100}};
// With a bias, each also with the activations one float off 16-byte alignment (the GEMV's
// scalar path).
inline constexpr MatMulShape kMatMulBiasMisaligned[] = {
    {1, 130, 896}, {5, 64, 1024}, {40, 90, 333}};
// Shapes larger than this (M * N * K) run in bf16 only.
inline constexpr int64_t kMatMulAllDTypesLimit = 100'000'000;

inline constexpr int64_t kRmsNormLengths[] = {1, 31, 64, 128, 896, 1000, 1024, 1025, 4097};
inline constexpr int64_t kRmsNormRows[] = {1, 3, 70};

inline constexpr int64_t kEmbeddingVocab = 1000;
inline constexpr int64_t kEmbeddingCols = 899;
inline constexpr int32_t kEmbeddingIds[] = {0, 999, 17, 17, 512, 3, 998};

inline constexpr int64_t kRopeHeadDims[] = {64, 128};
inline constexpr int64_t kRopeRows = 37;
inline constexpr int64_t kRopeHeads = 14;
inline constexpr int64_t kRopeMaxPos = 5000;

inline constexpr int64_t kElementwiseLengths[] = {1, 31, 1000, 1024, 1025, 100003};

// Exp's inputs: every `step`-th float bit pattern over [-110, 110] (both signs; the GPU test
// uses 97, about 23 million floats) plus the special values and both borders.
inline std::vector<float> ExpInputs(uint32_t step) {
  std::vector<float> x;
  for (uint32_t bits = 0; bits < 0x43000000u; bits += step) {
    float v;
    std::memcpy(&v, &bits, 4);
    if (v > 110.0f) break;
    x.push_back(v);
    x.push_back(-v);
  }
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72283f, 88.7228394f, -103.97f, -104.0f,
                  -104.1f, 1e-30f, -1e-30f}) {
    x.push_back(v);
  }
  return x;
}

struct AttentionShape {
  int64_t heads, kv_heads, head_dim;
};
inline constexpr AttentionShape kAttention[] = {{4, 2, 64}, {16, 8, 128}, {3, 1, 40}};
inline constexpr int64_t kAttentionPositions[] = {0, 1, 30, 31, 32, 33, 1023, 1024, 1025, 1499};
inline constexpr int64_t kAttentionMaxPos = 1500;

// The whole-model GPU tests (tests/gpu/engine_gpu_test.cc) run these presets at 2 layers with
// these batch sizes; a pass then holds between 1 and a few hundred rows.
inline constexpr const char* kEnginePresets[] = {"qwen3-0.6b", "qwen2.5-0.5b"};
inline constexpr int kEngineBatchSizes[] = {1, 2, 7, 32, 64};

// The streaming multiprocessors of an H200 (the GEMM tile choice depends on it).
inline constexpr int kH200SmCount = 132;

}  // namespace trace::gpu_shapes
