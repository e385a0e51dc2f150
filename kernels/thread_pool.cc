#include "kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace trace::kernels {
namespace {

// How long an idle worker (for new work) and a caller (for the last chunks) spin before they
// sleep on a futex. Measured on the 2-vCPU development VM (docs/models.md, "Against
// llama.cpp"): the serial work between two calls of a prefill averages ~30 us and a futex
// wake cost ~36 us per call; the bound caps what an idle pool burns (~100 us of one worker's
// CPU per call that is followed by a long pause).
constexpr auto kSpinTime = std::chrono::microseconds(100);
constexpr int kChunksPerThread = 8;  // the default grain aims at this many chunks per thread

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until done() or kSpinTime has passed; returns done()'s last value.
template <class Done>
bool SpinUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

constexpr uint64_t Pack(uint32_t generation, uint32_t value) {
  return static_cast<uint64_t>(generation) << 32 | value;
}
constexpr uint32_t GenerationOf(uint64_t packed) {
  return static_cast<uint32_t>(packed >> 32);
}
constexpr uint32_t ValueOf(uint64_t packed) {
  return static_cast<uint32_t>(packed);
}

class ThreadPoolImpl final : public ThreadPool {
 public:
  explicit ThreadPoolImpl(int threads) : num_threads_(threads) {
    for (int i = 1; i < threads; ++i) {
      workers_.emplace_back([this] { WorkerLoop(); });
    }
  }

  ~ThreadPoolImpl() override {
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int num_threads() const override { return num_threads_; }

  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& fn) override {
    if (n <= 0) return;
    if (grain <= 0)
      grain = (n + num_threads_ * kChunksPerThread - 1) / (num_threads_ * kChunksPerThread);
    // Chunk indices travel in 32 bits.
    grain = std::max(grain, (n + INT32_MAX - 1) / INT32_MAX);
    const int64_t chunks = (n + grain - 1) / grain;
    bool expected = false;
    // One chunk, or a nested or concurrent call: inline, same results, no deadlock.
    if (num_threads_ <= 1 || chunks <= 1 || !busy_.compare_exchange_strong(expected, true)) {
      fn(0, n);
      return;
    }
    const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
    fn_ = &fn;
    n_ = n;
    grain_ = grain;
    done_.store(0, std::memory_order_relaxed);
    limit_.store(Pack(generation, static_cast<uint32_t>(chunks)), std::memory_order_relaxed);
    // Publishes the fields above to every thread that claims a chunk of this generation.
    cursor_.store(Pack(generation, 0), std::memory_order_release);
    generation_.store(generation, std::memory_order_release);
    generation_.notify_all();  // no system call unless a worker sleeps
    RunChunks();
    const auto chunks_done = static_cast<uint32_t>(chunks);
    const auto all_done = [&] { return done_.load(std::memory_order_acquire) == chunks_done; };
    if (!SpinUntil(all_done)) {
      for (uint32_t d; (d = done_.load(std::memory_order_acquire)) != chunks_done;) {
        done_.wait(d, std::memory_order_acquire);
      }
    }
    fn_ = nullptr;
    busy_.store(false, std::memory_order_release);
  }

 private:
  // Claims and runs chunks of the current call until none is left.
  void RunChunks() {
    for (;;) {
      const uint64_t cursor = cursor_.load(std::memory_order_acquire);
      const uint64_t limit = limit_.load(std::memory_order_acquire);
      // A newer call has published its limit but not yet its cursor: look again.
      if (GenerationOf(cursor) != GenerationOf(limit)) continue;
      const uint32_t chunks = ValueOf(limit);
      const uint32_t chunk = ValueOf(cursor);
      if (chunk >= chunks) return;
      uint64_t expected = cursor;
      if (!cursor_.compare_exchange_weak(expected, cursor + 1, std::memory_order_acq_rel,
                                         std::memory_order_relaxed)) {
        continue;
      }
      // This chunk is claimed and not done, so its call is still waiting and fn_, n_, grain_
      // are its own.
      const int64_t begin = static_cast<int64_t>(chunk) * grain_;
      (*fn_)(begin, std::min(n_, begin + grain_));
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_one();
    }
  }

  void WorkerLoop() {
    uint32_t seen = 0;
    for (;;) {
      const auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!SpinUntil(changed)) {
        while (!changed()) generation_.wait(seen, std::memory_order_acquire);
      }
      seen = generation_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_acquire)) return;
      RunChunks();
    }
  }

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> generation_{0};  // bumped by every call that uses the workers
  std::atomic<uint64_t> cursor_{0};      // (generation, next chunk to claim)
  std::atomic<uint64_t> limit_{0};       // (generation, number of chunks)
  std::atomic<uint32_t> done_{0};        // chunks of the current call that are done
  // The current call, valid while one of its chunks is claimed and not done.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t grain_ = 1;
};

}  // namespace

std::unique_ptr<ThreadPool> ThreadPool::Create(int threads) {
  if (threads < 1) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::make_unique<ThreadPoolImpl>(threads);
}

}  // namespace trace::kernels
