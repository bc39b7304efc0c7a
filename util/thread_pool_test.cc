#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ds41 {
namespace {

TEST(ThreadPoolTest, ParallelForRunsEveryIndexOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(1000);
    pool.ParallelFor(1000, [&](int64_t i) { hits[i]++; });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPoolTest, SubmitAndConcurrentParallelFor) {
  ThreadPool pool(3);
  auto f = pool.Submit([] { return 41 + 1; });
  EXPECT_EQ(f.get(), 42);
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] { pool.ParallelFor(500, [&](int64_t i) { total += i; }); });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 500 * 499 / 2);
}

TEST(ThreadPoolTest, CompletesWhenWorkersAreBlocked) {
  ThreadPool pool(2);
  std::promise<void> release;
  auto blocker = pool.Submit([f = release.get_future().share()] { f.wait(); });
  int sum = 0;
  pool.ParallelFor(10, [&](int64_t i) { sum += static_cast<int>(i); });  // the caller does it all
  EXPECT_EQ(sum, 45);
  release.set_value();
  blocker.get();
}

}  // namespace
}  // namespace ds41
