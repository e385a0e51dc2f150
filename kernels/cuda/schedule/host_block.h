// A CUDA thread block run on the host, so the canonical kernels' bodies
// (kernels/cuda/schedule/*.h) can be executed by CPU tests over every block and thread of a
// launch, with their races caught. The bodies are written once against this interface
// ("Ex"); the device twin is DeviceBlock (kernels/cuda/device_block.cuh), whose members are
// the real thing:
//
//   int threads() const                   threads in the block (blockDim.x)
//   Local<T> v(ex)                        one T per thread (a register on the device), v[tid]
//   Shared(T* p, n, "kernel.name")        memory the block's threads share (shared memory, or
//                                         the block's part of a global scratch buffer): on
//                                         the device p itself; on the host a checked pointer
//                                         that records every access (below)
//   ForEachThread(f)                      f(tid) for this block's threads: the device calls
//                                         f(threadIdx.x); the host calls f for every thread,
//                                         in a shuffled order (fixed seed), so phase after
//                                         phase of the whole block
//   Barrier()                             __syncthreads(); on the host, the end of a barrier
//                                         interval for the race check
//   WarpGather(tid, get, out[32])         out[l] = get(t) of lane l of tid's warp, for
//                                         l = 0..31: the device shuffles each lane's own
//                                         get(threadIdx.x) (__shfl_sync from lane l); the
//                                         host calls get for the 32 threads of the warp
//
// Only values move through these members; every arithmetic step is in the bodies, i.e.
// in code both sides compile from one source. A body must keep control flow that is uniform
// across a block around Barrier() and across a warp around WarpGather(), as CUDA requires.
//
// The race check. On a GPU the threads of a block run concurrently between two barriers, so
// a body is correct only if no thread touches, in one barrier interval, a shared element
// that another thread writes in the same interval. The host runs phases one after the other,
// where such a body still computes the right answer; so the host block records, per
// element of every Shared buffer, which thread wrote it and which read it since the last
// Barrier(), and a write by one thread with any access by another in the same interval is a
// race (phases without a Barrier between them are one interval: a missing barrier shows as
// the race it leaves). Reading another thread's Local outside WarpGather is one too (a
// register is private to its thread), and so is an index outside a Shared buffer.
// SimulateBlock reports it and SimulateGrid throws it (RaceError), naming the kernel's buffer,
// element, threads and block.
//
// Ownership: a HostBlock owns its thread count and the race record; Local<T> owns its
// values; a SharedPtr borrows the memory and the block. Thread safety: one HostBlock per
// thread. Errors: RaceError from SimulateGrid.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "base/splitmix64.h"
#include "kernels/cuda/schedule/launch.h"

namespace trace::kernels::cuda::schedule {

// A race (or an out-of-bounds access) in a body run by SimulateGrid.
class RaceError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

class HostBlock {
 public:
  explicit HostBlock(int threads, uint64_t order_seed = 0)
      : threads_(threads), order_(static_cast<size_t>(threads)) {
    for (int t = 0; t < threads; ++t) order_[static_cast<size_t>(t)] = t;
    // Fisher-Yates with the seeded generator: the same order for the same block every run.
    SplitMix64 rng(order_seed);
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.Below(i)]);
  }
  int threads() const { return threads_; }

  template <class T>
  class Local {
   public:
    explicit Local(const HostBlock& block)
        : block_(&block), values_(static_cast<size_t>(block.threads())) {}
    T& operator[](int tid) {
      block_->CheckLocal(tid);
      return values_[static_cast<size_t>(tid)];
    }

   private:
    const HostBlock* block_;
    std::vector<T> values_;
  };

  // The race record of one Shared buffer: per element, who wrote and read it when.
  struct Element {
    uint64_t interval = 0;  // the barrier interval the rest is about (stale: nothing yet)
    int writer = -1;        // thread that wrote it in `interval`, -1: none
    int reader = -1;        // a thread that read it in `interval`, -1: none
    bool readers = false;   // more than one thread read it
  };
  struct Shadow {
    const char* name;
    const void* base;
    int64_t count;
    std::vector<Element> elements;
  };

  // A checked pointer into a Shared buffer: p[i] reads and writes through the race record;
  // p + k, *p as for a pointer.
  template <class T>
  class SharedPtr {
   public:
    class Ref {
     public:
      Ref(const SharedPtr& p, int64_t i) : p_(p), i_(i) {}
      operator T() const { return *p_.Access(i_, /*write=*/false); }  // NOLINT: a value
      Ref& operator=(T v) {
        *p_.Access(i_, /*write=*/true) = v;
        return *this;
      }
      Ref& operator=(const Ref& other) { return *this = static_cast<T>(other); }
      Ref& operator+=(T v) { return *this = static_cast<T>(*this) + v; }  // a read, a write

     private:
      SharedPtr p_;
      int64_t i_;
    };

    SharedPtr(HostBlock* block, T* base, Shadow* shadow, int64_t offset = 0)
        : block_(block), base_(base), shadow_(shadow), offset_(offset) {}
    Ref operator[](int64_t i) const { return Ref(*this, i); }
    Ref operator*() const { return Ref(*this, 0); }
    SharedPtr operator+(int64_t k) const { return SharedPtr(block_, base_, shadow_, offset_ + k); }

   private:
    T* Access(int64_t i, bool write) const {
      const int64_t at = offset_ + i;
      block_->Record(*shadow_, at, write);
      return base_ + at;
    }
    HostBlock* block_;
    T* base_;
    Shadow* shadow_;
    int64_t offset_;
  };

  template <class T>
  SharedPtr<T> Shared(T* base, int64_t count, const char* name) {
    for (const auto& s : shadows_) {
      if (s->base == base && s->count == count && s->name == name) {
        return SharedPtr<T>(this, base, s.get());
      }
    }
    shadows_.push_back(std::make_unique<Shadow>(
        Shadow{name, base, count, std::vector<Element>(static_cast<size_t>(count))}));
    return SharedPtr<T>(this, base, shadows_.back().get());
  }

  template <class F>
  void ForEachThread(F&& f) {
    for (int tid : order_) {
      current_ = tid;
      f(tid);
    }
    current_ = -1;
  }
  void Barrier() { ++interval_; }
  template <class Get>
  void WarpGather(int tid, Get&& get, float (&out)[canonical::kLanes]) {
    const int warp_base = tid / canonical::kLanes * canonical::kLanes;
    gathering_ = true;
    for (int l = 0; l < canonical::kLanes; ++l) out[l] = get(warp_base + l);
    gathering_ = false;
  }

  // The first race found, or "" (SimulateGrid throws it).
  const std::string& race() const { return race_; }

 private:
  void Report(std::string what) const {
    if (race_.empty()) race_ = std::move(what);
  }
  static std::string Thread(int tid) { return "thread " + std::to_string(tid); }

  void CheckLocal(int tid) const {
    if (current_ >= 0 && tid != current_ && !gathering_) {
      Report(Thread(current_) + " read " + Thread(tid) +
             "'s Local value outside WarpGather (a register is private to its thread)");
    }
  }

  void Record(Shadow& shadow, int64_t at, bool write) {
    auto where = [&] { return std::string(shadow.name) + "[" + std::to_string(at) + "]"; };
    if (at < 0 || at >= shadow.count) {
      Report(where() + " is outside the buffer of " + std::to_string(shadow.count) + " elements (" +
             Thread(current_) + ")");
      return;
    }
    if (current_ < 0) {
      Report(where() + " accessed outside ForEachThread (no thread does that on a GPU)");
      return;
    }
    Element& e = shadow.elements[static_cast<size_t>(at)];
    if (e.interval != interval_) e = Element{interval_, -1, -1, false};
    const int me = current_;
    if (e.writer >= 0 && e.writer != me) {
      Report(where() + ": " + Thread(me) + (write ? " wrote" : " read") + " what " +
             Thread(e.writer) + " wrote in barrier interval " + std::to_string(interval_) +
             " (a missing Barrier?)");
    } else if (write && e.reader >= 0 && (e.reader != me || e.readers)) {
      Report(where() + ": " + Thread(me) + " wrote what " +
             (e.reader != me ? Thread(e.reader) : std::string("other threads")) +
             " read in barrier interval " + std::to_string(interval_) + " (a missing Barrier?)");
    }
    if (write) {
      e.writer = me;
    } else if (e.reader < 0) {
      e.reader = me;
    } else if (e.reader != me) {
      e.readers = true;
    }
  }

  int threads_;
  std::vector<int> order_;
  int current_ = -1;  // the thread ForEachThread is running, -1: none
  bool gathering_ = false;
  uint64_t interval_ = 1;
  std::vector<std::unique_ptr<Shadow>> shadows_;
  mutable std::string race_;
};

// Runs body(block, block_x, block_y) for one block of a launch, its threads in a shuffled
// order fixed by the block's coordinates: the race found ("race in block (x, y): ..."), or "".
template <class Body>
std::string SimulateBlock(const LaunchDims& dims, uint32_t block_x, uint32_t block_y, Body&& body) {
  HostBlock block(dims.block, (uint64_t{block_y} << 32) | block_x);
  body(block, block_x, block_y);
  if (block.race().empty()) return "";
  return "race in block (" + std::to_string(block_x) + ", " + std::to_string(block_y) +
         "): " + block.race();
}

// Runs every block of a launch, in order (SimulateBlock); throws RaceError at the first
// block with a race.
template <class Body>
void SimulateGrid(const LaunchDims& dims, Body&& body) {
  for (uint32_t by = 0; by < dims.grid_y; ++by) {
    for (uint32_t bx = 0; bx < dims.grid_x; ++bx) {
      if (std::string race = SimulateBlock(dims, bx, by, body); !race.empty()) {
        throw RaceError(race);
      }
    }
  }
}

}  // namespace trace::kernels::cuda::schedule
