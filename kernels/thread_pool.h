// A fixed pool of worker threads that kernels use to split independent outputs (output
// columns, heads, rows) — never a reduction — so results do not depend on the count.
//
// Scheduling: [0, n) is cut into chunks of `grain` consecutive indices that the calling
// thread and the workers claim one at a time from a shared counter, in increasing order, as
// each becomes free. A thread that runs faster (or was not preempted by the host) simply
// takes more chunks, so a call ends when the work is done rather than when the slowest of a
// fixed split is done. Which thread runs a chunk, and how many chunks a thread runs, depend
// on timing: a caller's fn must compute every index's outputs independently of the range it
// arrives in and of the thread (no per-range accumulators or buffers indexed by range; a
// thread_local scratch is fine). Then the results are bitwise the same for every thread count
// and grain. Between calls, idle workers spin for a bounded time (about kSpinMicros below)
// before sleeping on a futex, so back-to-back calls do not pay a wake-up each; an idle pool
// costs no CPU after that.
//
// Ownership: the pool owns its threads and joins them on destruction. Thread safety:
// ParallelFor may be called from any thread; a call made while another is running (or
// from inside a task) runs inline on the calling thread, as fn(0, n), instead of deadlocking.
// Errors: none; a task must not throw.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace trace::kernels {

class ThreadPool {
 public:
  // `threads` is the total number of threads that run tasks, the caller included
  // (1: no workers). Values < 1 mean std::thread::hardware_concurrency().
  static std::unique_ptr<ThreadPool> Create(int threads);
  virtual ~ThreadPool() = default;

  virtual int num_threads() const = 0;

  // Runs fn(begin, end) over chunks that partition [0, n): each chunk is `grain`
  // consecutive indices (the last may be shorter), claimed dynamically by the calling thread
  // and the workers (see the file comment); grain <= 0 lets the pool choose (about 8 chunks
  // per thread). Returns when every chunk is done.
  virtual void ParallelFor(int64_t n, int64_t grain,
                           const std::function<void(int64_t, int64_t)>& fn) = 0;
  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    ParallelFor(n, 0, fn);
  }
};

// Runs fn over [0, n) on `pool` in chunks of `grain` (0: the pool's choice), or inline as
// fn(0, n) when pool is null or has one thread.
inline void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain,
                        const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (pool == nullptr || pool->num_threads() <= 1 || n == 1) {
    fn(0, n);
  } else {
    pool->ParallelFor(n, grain, fn);
  }
}
inline void ParallelFor(ThreadPool* pool, int64_t n,
                        const std::function<void(int64_t, int64_t)>& fn) {
  ParallelFor(pool, n, 0, fn);
}

}  // namespace trace::kernels
