// The pool's scheduling contract (kernels/thread_pool.h): the chunks of a call partition
// [0, n) in runs of `grain`, claimed dynamically; nested and concurrent calls run inline;
// workers asleep or spinning are woken and joined. Run it repeatedly to shake out races:
// ctest --test-dir build -R KernelsThreadPool --repeat until-fail:20
#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace trace::kernels {
namespace {

TEST(KernelsThreadPool, ChunksPartitionTheRangeInRunsOfGrain) {
  for (int threads : {1, 2, 3, 7}) {
    auto pool = ThreadPool::Create(threads);
    EXPECT_EQ(pool->num_threads(), threads);
    for (int64_t n : {1, 2, 3, 7, 28, 100, 129, 1001}) {
      for (int64_t grain : {0, 1, 2, 3, 5, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> bad_ranges{0};
        for (int rep = 0; rep < 3; ++rep) {
          pool->ParallelFor(n, grain, [&](int64_t b, int64_t e) {
            // Inline (one thread, or one chunk) is the single range [0, n); otherwise a
            // chunk starts at a multiple of the grain and is one grain long but the last.
            const bool whole = b == 0 && e == n;
            const bool chunk = grain > 0 && b % grain == 0 && (e - b == grain || e == n);
            if (b < 0 || e > n || b >= e || (!whole && !chunk && grain > 0)) ++bad_ranges;
            for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
          });
        }
        ASSERT_EQ(bad_ranges.load(), 0)
            << "threads " << threads << " n " << n << " grain " << grain;
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 3)
              << "index " << i << " threads " << threads << " n " << n << " grain " << grain;
        }
      }
    }
  }
}

TEST(KernelsThreadPool, FreeFunctionRunsInlineWithoutAPool) {
  int calls = 0;
  ParallelFor(nullptr, 10, 3, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
    ++calls;
  });
  ParallelFor(nullptr, 0, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(KernelsThreadPool, NestedCallRunsInline) {
  auto pool = ThreadPool::Create(2);
  std::atomic<int> total{0};
  pool->ParallelFor(4, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool->ParallelFor(10, 1, [&](int64_t b2, int64_t e2) {
        // Inline: the whole range at once.
        EXPECT_EQ(e2 - b2, 10);
        total += static_cast<int>(e2 - b2);
      });
    }
  });
  EXPECT_EQ(total.load(), 40);
}

TEST(KernelsThreadPool, ConcurrentCallersEachCoverTheirRange) {
  auto pool = ThreadPool::Create(3);
  constexpr int kCallers = 3, kCalls = 300;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      const int64_t n = 17 + c * 10;
      std::vector<int> hits(static_cast<size_t>(n));
      for (int call = 0; call < kCalls; ++call) {
        std::fill(hits.begin(), hits.end(), 0);
        pool->ParallelFor(n, 1 + c, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (int h : hits) wrong += h != 1;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Whichever thread claims a chunk first holds it until the other chunk is done: the call can
// only finish if a second thread takes that chunk (a static or caller-only split deadlocks,
// and the test fails at the bound rather than hanging).
TEST(KernelsThreadPool, AWorkerTakesChunksWhileTheCallerIsBusy) {
  auto pool = ThreadPool::Create(2);
  for (int rep = 0; rep < 20; ++rep) {
    std::mutex mu;
    std::condition_variable cv;
    int done = 0;
    bool timed_out = false;
    std::thread::id ran[2];
    pool->ParallelFor(2, 1, [&](int64_t b, int64_t) {
      ran[b] = std::this_thread::get_id();
      std::unique_lock<std::mutex> lock(mu);
      ++done;
      cv.notify_all();
      if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == 2; })) {
        timed_out = true;
      }
    });
    ASSERT_FALSE(timed_out) << "rep " << rep;
    EXPECT_NE(ran[0], ran[1]);
  }
}

// Many short calls back to back: the hand-over between calls (spinning and sleeping
// workers, a worker that wakes after its call has ended) never loses or repeats a chunk.
TEST(KernelsThreadPool, ManyShortCallsBackToBack) {
  for (int threads : {2, 3}) {
    auto pool = ThreadPool::Create(threads);
    std::vector<int64_t> out(64);
    int64_t total = 0;
    for (int call = 0; call < 20000; ++call) {
      const int64_t n = 1 + call % 64;
      pool->ParallelFor(n, 1 + call % 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = call;
      });
      for (int64_t i = 0; i < n; ++i) total += out[static_cast<size_t>(i)] == call;
    }
    int64_t expected = 0;
    for (int call = 0; call < 20000; ++call) expected += 1 + call % 64;
    EXPECT_EQ(total, expected) << threads << " threads";
  }
}

TEST(KernelsThreadPool, DestroysWithIdleSpinningOrSleepingWorkers) {
  for (int threads : {2, 7}) {
    ThreadPool::Create(threads).reset();  // workers never given work
    auto pool = ThreadPool::Create(threads);
    std::atomic<int64_t> sum{0};
    pool->ParallelFor(100, [&](int64_t b, int64_t e) { sum += e - b; });
    EXPECT_EQ(sum.load(), 100);
    pool.reset();  // workers still spinning after the call
    pool = ThreadPool::Create(threads);
    pool->ParallelFor(100, [&](int64_t b, int64_t e) { sum += e - b; });
    // Past the bounded spin (100 us), so the workers are most likely asleep on the futex;
    // either way destruction must wake and join them.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pool.reset();
    EXPECT_EQ(sum.load(), 200);
  }
}

}  // namespace
}  // namespace trace::kernels
