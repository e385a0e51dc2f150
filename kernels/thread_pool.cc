#include "kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace trace::kernels {
namespace {

class ThreadPoolImpl final : public ThreadPool {
 public:
  explicit ThreadPoolImpl(int threads) : num_threads_(threads) {
    for (int i = 1; i < threads; ++i) {
      workers_.emplace_back([this, i] { WorkerLoop(i); });
    }
  }

  ~ThreadPoolImpl() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int num_threads() const override { return num_threads_; }

  void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    if (n <= 0) return;
    bool expected = false;
    // A nested or concurrent call runs inline: same results, no deadlock.
    if (num_threads_ <= 1 || !busy_.compare_exchange_strong(expected, true)) {
      fn(0, n);
      return;
    }
    const int parts = static_cast<int>(std::min<int64_t>(n, num_threads_));
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      n_ = n;
      parts_ = parts;
      pending_ = parts - 1;
      ++generation_;
    }
    start_cv_.notify_all();
    RunPart(0);
    {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [this] { return pending_ == 0; });
      fn_ = nullptr;
    }
    busy_.store(false);
  }

 private:
  void RunPart(int part) {
    const int64_t begin = n_ * part / parts_;
    const int64_t end = n_ * (part + 1) / parts_;
    if (begin < end) (*fn_)(begin, end);
  }

  void WorkerLoop(int index) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (index >= parts_) continue;
      }
      RunPart(index);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  std::atomic<bool> busy_{false};
  bool stop_ = false;
  uint64_t generation_ = 0;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0;
  int pending_ = 0;
};

}  // namespace

std::unique_ptr<ThreadPool> ThreadPool::Create(int threads) {
  if (threads < 1) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::make_unique<ThreadPoolImpl>(threads);
}

}  // namespace trace::kernels
