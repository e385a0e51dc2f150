// Row moves of the CUDA engine on the device: appending K/V rows to per-sequence caches
// and gathering the rows whose logits were asked for. Internal to engine/cuda.
//
// Ownership: device pointers owned by the caller. Thread safety: enqueued on `stream`.
// Errors: none here; launch errors surface at the engine's next CUDA_CHECK.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace trace::engine::cuda {

// dst_rows[r] + positions[r] * width receives src + r * width, for r < rows.
// dst_rows, positions: device arrays [rows].
void ScatterRows(cudaStream_t stream, const float* src, int64_t rows, int64_t width,
                 float* const* dst_rows, const int32_t* positions);

// dst + i * width receives src + index[i] * width, for i < count (index: device [count]).
void GatherRows(cudaStream_t stream, const float* src, const int32_t* index, int64_t count,
                int64_t width, float* dst);

}  // namespace trace::engine::cuda
