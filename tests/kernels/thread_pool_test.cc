#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace trace::kernels {
namespace {

TEST(KernelsThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    auto pool = ThreadPool::Create(threads);
    EXPECT_EQ(pool->num_threads(), threads);
    for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 3; ++rep) {
        pool->ParallelFor(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
      }
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 3) << i;
    }
  }
}

TEST(KernelsThreadPool, NestedCallRunsInline) {
  auto pool = ThreadPool::Create(2);
  std::atomic<int> total{0};
  pool->ParallelFor(4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool->ParallelFor(10, [&](int64_t b2, int64_t e2) { total += static_cast<int>(e2 - b2); });
    }
  });
  EXPECT_EQ(total.load(), 40);
}

TEST(KernelsThreadPool, RunsPartsOnDistinctThreads) {
  auto pool = ThreadPool::Create(2);
  std::thread::id ids[2];
  pool->ParallelFor(2, [&](int64_t b, int64_t e) { ids[b] = std::this_thread::get_id(); });
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  EXPECT_NE(ids[0], ids[1]);
}

}  // namespace
}  // namespace trace::kernels
