#include "util/cancel_token.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace ds41 {
namespace {

TEST(CancelTokenTest, CancelRunsAttachedCallbacksOnce) {
  CancelToken t;
  int runs = 0;
  bool attached = false;
  auto a = t.OnCancel([&] { ++runs; }, &attached);
  EXPECT_TRUE(attached);
  EXPECT_FALSE(t.cancelled());
  t.Cancel();
  t.Cancel();
  EXPECT_TRUE(t.cancelled());
  EXPECT_EQ(runs, 1);
}

TEST(CancelTokenTest, AttachingAfterCancelRunsAtOnce) {
  CancelToken t;
  t.Cancel();
  int runs = 0;
  bool attached = true;
  auto a = t.OnCancel([&] { ++runs; }, &attached);
  EXPECT_FALSE(attached);
  EXPECT_EQ(runs, 1);
}

TEST(CancelTokenTest, DetachedCallbackNeverRuns) {
  CancelToken t;
  int runs = 0;
  { auto a = t.OnCancel([&] { ++runs; }); }
  auto kept = t.OnCancel([&] { runs += 10; });
  t.Cancel();
  EXPECT_EQ(runs, 10);
}

TEST(CancelTokenTest, CancelFromAnotherThreadReachesEveryAttachment) {
  CancelToken t;
  std::atomic<int> runs{0};
  auto a = t.OnCancel([&] { runs.fetch_add(1); });
  auto b = t.OnCancel([&] { runs.fetch_add(1); });
  std::thread other([&] { t.Cancel(); });
  other.join();
  EXPECT_EQ(runs.load(), 2);
}

TEST(CancelTokenTest, KeepsTheFirstReason) {
  CancelToken t;
  EXPECT_EQ(t.reason(), CancelReason::kClient);
  t.Cancel(CancelReason::kDeadline);
  t.Cancel(CancelReason::kShutdown);  // already cancelled: nothing changes
  EXPECT_EQ(t.reason(), CancelReason::kDeadline);
  EXPECT_STREQ(CancelReasonName(t.reason()), "deadline");
}

TEST(CancelTokenTest, ReasonNowTellsDeadlineFromClientAndThenShutdown) {
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(CancelReasonNow(now + std::chrono::seconds(30)), CancelReason::kClient);
  EXPECT_EQ(CancelReasonNow(now - std::chrono::milliseconds(1)), CancelReason::kDeadline);
  EXPECT_EQ(CancelReasonNow(now + std::chrono::milliseconds(20)), CancelReason::kDeadline);  // the caller's timer fired first
  // In the grace period a cancel is still the client's; from its end on, the shutdown's.
  MarkShuttingDown(now + std::chrono::seconds(30));
  EXPECT_EQ(CancelReasonNow(now + std::chrono::hours(1)), CancelReason::kClient);
  MarkShuttingDown(now);
  EXPECT_EQ(CancelReasonNow(now + std::chrono::hours(1)), CancelReason::kShutdown);
}

}  // namespace
}  // namespace ds41
