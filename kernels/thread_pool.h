// A fixed pool of worker threads that kernels use to split independent outputs (output
// columns, heads, rows) — never a reduction — so results do not depend on the count.
//
// Ownership: the pool owns its threads and joins them on destruction. Thread safety:
// ParallelFor may be called from any thread; a call made while another is running (or
// from inside a task) runs inline on the calling thread instead of deadlocking.
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

  // Splits [0, n) into at most num_threads() contiguous ranges and runs
  // fn(begin, end) for each, the calling thread taking the first; returns when all are
  // done. The split depends only on (n, num_threads()).
  virtual void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) = 0;
};

// Runs fn over [0, n) on `pool`, or inline when pool is null.
inline void ParallelFor(ThreadPool* pool, int64_t n,
                        const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (pool == nullptr || pool->num_threads() <= 1 || n == 1) {
    fn(0, n);
  } else {
    pool->ParallelFor(n, fn);
  }
}

}  // namespace trace::kernels
