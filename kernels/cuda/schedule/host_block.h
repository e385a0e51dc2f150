// A CUDA thread block run on the host, so the canonical kernels' bodies
// (kernels/cuda/schedule/*.h) can be executed by CPU tests over every block and thread of a
// launch. The bodies are written once against this interface ("Ex"); the device twin is
// DeviceBlock (kernels/cuda/device_block.cuh), whose members are the real thing:
//
//   int threads() const                   threads in the block (blockDim.x)
//   Local<T> v(ex)                        one T per thread (a register on the device), v[tid]
//   ForEachThread(f)                      f(tid) for this block's threads: the device calls
//                                         f(threadIdx.x); the host calls f(0), f(1), ... in
//                                         order, so phase after phase of the whole block
//   Barrier()                             __syncthreads(); nothing on the host, where the
//                                         previous phase has already run on every thread
//   WarpGather(tid, get, out[32])         out[l] = get(t) of lane l of tid's warp, for
//                                         l = 0..31: the device shuffles each lane's own
//                                         get(threadIdx.x) (__shfl_sync from lane l); the
//                                         host calls get for the 32 threads of the warp
//
// Only values move through these members; every arithmetic step is in the bodies, i.e.
// in code both sides compile from one source. A body must keep control flow that is uniform
// across a block around Barrier() and across a warp around WarpGather(), as CUDA requires.
//
// Ownership: a HostBlock owns nothing but its thread count; Local<T> owns its values.
// Thread safety: one HostBlock per thread. Errors: none.
#pragma once

#include <vector>

#include "kernels/cuda/schedule/launch.h"

namespace trace::kernels::cuda::schedule {

class HostBlock {
 public:
  explicit HostBlock(int threads) : threads_(threads) {}
  int threads() const { return threads_; }

  template <class T>
  class Local {
   public:
    explicit Local(const HostBlock& block) : values_(static_cast<size_t>(block.threads())) {}
    T& operator[](int tid) { return values_[static_cast<size_t>(tid)]; }

   private:
    std::vector<T> values_;
  };

  template <class F>
  void ForEachThread(F&& f) {
    for (int tid = 0; tid < threads_; ++tid) f(tid);
  }
  void Barrier() {}
  template <class Get>
  void WarpGather(int tid, Get&& get, float (&out)[canonical::kLanes]) {
    const int warp_base = tid / canonical::kLanes * canonical::kLanes;
    for (int l = 0; l < canonical::kLanes; ++l) out[l] = get(warp_base + l);
  }

 private:
  int threads_;
};

// Runs body(block, block_x, block_y) for every block of a launch, in order.
template <class Body>
void SimulateGrid(const LaunchDims& dims, Body&& body) {
  for (uint32_t by = 0; by < dims.grid_y; ++by) {
    for (uint32_t bx = 0; bx < dims.grid_x; ++bx) {
      HostBlock block(dims.block);
      body(block, bx, by);
    }
  }
}

}  // namespace trace::kernels::cuda::schedule
