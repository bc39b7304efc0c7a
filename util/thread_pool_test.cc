#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <future>
#include <numeric>
#include <stdexcept>
#include <thread>

namespace ds41 {
namespace {

TEST(ThreadPoolTest, ParallelForRunsEveryIndexOnce) {
  for (auto idle : {ThreadPool::Idle::kSleep, ThreadPool::Idle::kSpinThenSleep})
    for (int threads : {1, 2, 4}) {
      ThreadPool pool(threads, idle);
      for (int round = 0; round < 50; ++round) {  // back to back, as a decode step's matmuls come
        std::vector<std::atomic<int>> hits(1000);
        pool.ParallelFor(1000, [&](int64_t i) { hits[i]++; });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1);
      }
    }
}

TEST(ThreadPoolTest, ParallelRangesCoverEveryIndexOnceInRangesOfAtLeastTheGrain) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 7, 100, 1000, 4097})
    for (int64_t grain : {1, 10, 5000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> ranges{0}, short_ranges{0};
      pool.ParallelRanges(n, grain, [&](int64_t b, int64_t e) {
        ++ranges;
        if (e - b < grain && e - b < n) ++short_ranges;
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << n << " " << grain;
      EXPECT_EQ(short_ranges.load(), 0) << n << " " << grain;
      if (n >= 2 * grain && n > 0) {
        EXPECT_GT(ranges.load(), 1) << n << " " << grain;
      }
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

TEST(ThreadPoolTest, ScheduleRunsMoveOnlyWorkOnAWorkerOrInline) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::promise<std::thread::id> ran;
    auto ran_on = ran.get_future();
    auto owned = std::make_unique<int>(7);  // move-only capture, as a data-path session's PUT bodies
    pool.Schedule([owned = std::move(owned), ran = std::move(ran)]() mutable { ran.set_value(std::this_thread::get_id()); });
    const std::thread::id on = ran_on.get();
    if (threads == 1) {
      EXPECT_EQ(on, std::this_thread::get_id());
    } else {
      EXPECT_NE(on, std::this_thread::get_id());
    }
  }
}

TEST(ThreadPoolTest, AScheduledTaskThatThrowsLeavesThePoolWorking) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    pool.Schedule([] { throw std::runtime_error("planted"); });
    std::promise<int> after;
    auto got = after.get_future();
    pool.Schedule([&after] { after.set_value(7); });
    EXPECT_EQ(got.get(), 7);
  }
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
