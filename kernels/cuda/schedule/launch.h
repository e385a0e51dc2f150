// The launch geometry of the CUDA kernels, host-callable: the launchers in kernels/cuda/*.cu
// and the CPU simulations in tests/kernels/cuda_schedule_test.cc take grid and block sizes
// from the same functions, so a test runs exactly the blocks and threads a launch would.
//
// Ownership: values only. Thread safety: pure. Errors: none.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/canonical.h"

// Full unrolling of a loop with a constant trip count, on the device only.
#if defined(__CUDACC__)
#define TRACE_UNROLL _Pragma("unroll")
#else
#define TRACE_UNROLL
#endif

namespace trace::kernels::cuda::schedule {

// A 2-D grid of 1-D blocks (every kernel of trace uses this shape).
struct LaunchDims {
  uint32_t grid_x = 1;
  uint32_t grid_y = 1;
  int block = 1;            // threads per block
  size_t shared_bytes = 0;  // dynamic shared memory
};

TRACE_HD uint32_t CeilDiv(int64_t a, int64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

// One thread per element of an array of `count`: 256-thread blocks.
inline constexpr int kElementwiseThreads = 256;
TRACE_HD LaunchDims ElementwiseLaunch(int64_t count) {
  LaunchDims d;
  d.grid_x = CeilDiv(count, kElementwiseThreads);
  d.block = kElementwiseThreads;
  return d;
}
TRACE_HD int64_t ElementIndex(uint32_t block_x, int tid) {
  return static_cast<int64_t>(block_x) * kElementwiseThreads + tid;
}

}  // namespace trace::kernels::cuda::schedule
