#include "engine/cuda/kv_ops.h"

namespace trace::engine::cuda {
namespace {

__global__ void ScatterRowsKernel(const float* src, int64_t width, float* const* dst_rows,
                                  const int32_t* positions) {
  const int64_t r = blockIdx.y;
  float* dst = dst_rows[r] + static_cast<int64_t>(positions[r]) * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < width;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[r * width + i];
  }
}

__global__ void GatherRowsKernel(const float* src, const int32_t* index, int64_t width,
                                 float* dst) {
  const int64_t i = blockIdx.y;
  const float* row = src + static_cast<int64_t>(index[i]) * width;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < width;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i * width + c] = row[c];
  }
}

unsigned int ColumnBlocks(int64_t width) {
  const int64_t blocks = (width + 255) / 256;
  return static_cast<unsigned int>(blocks < 16 ? blocks : 16);
}

}  // namespace

void ScatterRows(cudaStream_t stream, const float* src, int64_t rows, int64_t width,
                 float* const* dst_rows, const int32_t* positions) {
  if (rows <= 0 || width <= 0) return;
  const dim3 grid(ColumnBlocks(width), static_cast<unsigned int>(rows));
  ScatterRowsKernel<<<grid, 256, 0, stream>>>(src, width, dst_rows, positions);
}

void GatherRows(cudaStream_t stream, const float* src, const int32_t* index, int64_t count,
                int64_t width, float* dst) {
  if (count <= 0 || width <= 0) return;
  const dim3 grid(ColumnBlocks(width), static_cast<unsigned int>(count));
  GatherRowsKernel<<<grid, 256, 0, stream>>>(src, index, width, dst);
}

}  // namespace trace::engine::cuda
