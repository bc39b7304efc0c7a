#include "cache_service/store/read_cache.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace ds41 {
namespace {

SegmentLocation At(uint32_t segment, uint64_t offset) { return {segment, offset, 0}; }

class ReadCacheTest : public ::testing::Test {
 protected:
  prometheus::Registry registry_;
  StoreMetrics metrics_{registry_};
};

TEST_F(ReadCacheTest, ALocationIsKeptOnItsSecondReadAndCounted) {
  ReadCache c(1 << 20, &metrics_);
  const std::string unit(1000, 'a');
  EXPECT_EQ(c.Get(At(1, 0)), nullptr);
  c.Offer(At(1, 0), unit);  // first read: only marked
  EXPECT_EQ(c.Get(At(1, 0)), nullptr);
  EXPECT_EQ(c.bytes(), 0u);
  c.Offer(At(1, 0), unit);  // read again: kept
  auto held = c.Get(At(1, 0));
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(*held, unit);
  EXPECT_EQ(c.Get(At(1, 1)), nullptr);  // another offset of the same segment is another unit
  EXPECT_EQ(c.Get(At(2, 0)), nullptr);
  EXPECT_EQ(c.bytes(), 1000u);
  EXPECT_EQ(metrics_.read_cache_hits.Value(), 1);
  EXPECT_EQ(metrics_.read_cache_misses.Value(), 4);
  EXPECT_EQ(metrics_.read_cache_bytes.Value(), 1000);
  EXPECT_EQ(metrics_.read_cache_budget_bytes.Value(), 1 << 20);
}

TEST_F(ReadCacheTest, TheBudgetEvictsTheLeastRecentlyUsedFirst) {
  ReadCache c(3000, &metrics_);
  const std::string unit(1000, 'u');
  for (uint64_t off : {0, 1, 2})
    for (int twice = 0; twice < 2; ++twice) c.Offer(At(1, off), unit);
  ASSERT_EQ(c.bytes(), 3000u);
  ASSERT_NE(c.Get(At(1, 0)), nullptr);  // 0 is now the most recent, 1 the least
  for (int twice = 0; twice < 2; ++twice) c.Offer(At(1, 3), unit);
  EXPECT_EQ(c.bytes(), 3000u);
  EXPECT_EQ(c.Get(At(1, 1)), nullptr);
  EXPECT_NE(c.Get(At(1, 0)), nullptr);
  EXPECT_NE(c.Get(At(1, 2)), nullptr);
  EXPECT_NE(c.Get(At(1, 3)), nullptr);
  EXPECT_EQ(metrics_.read_cache_evictions.Value(), 1);
  // A unit larger than the whole budget is never kept; an entry handed out outlives its eviction.
  auto kept = c.Get(At(1, 3));
  for (int twice = 0; twice < 2; ++twice) c.Offer(At(9, 0), std::string(4000, 'x'));
  EXPECT_EQ(c.Get(At(9, 0)), nullptr);
  for (uint64_t off : {10, 11, 12})
    for (int twice = 0; twice < 2; ++twice) c.Offer(At(1, off), unit);
  EXPECT_EQ(c.Get(At(1, 3)), nullptr);
  EXPECT_EQ(*kept, unit);
}

TEST_F(ReadCacheTest, AZeroBudgetKeepsNothing) {
  ReadCache c(0, &metrics_);
  for (int i = 0; i < 3; ++i) c.Offer(At(1, 0), "abc");
  EXPECT_EQ(c.Get(At(1, 0)), nullptr);
  EXPECT_EQ(c.bytes(), 0u);
}

// Marks are bounded: a long one-pass scan forgets its first locations, so they need two reads again.
TEST_F(ReadCacheTest, OnePassReadsOnlyLeaveBoundedMarks) {
  ReadCache c(1 << 20, &metrics_);  // marks for 2 * budget / 57 KiB, at least 1024
  c.Offer(At(1, 0), "unit");
  for (uint64_t off = 1; off <= 5000; ++off) c.Offer(At(1, off), "unit");
  c.Offer(At(1, 0), "unit");  // its mark is gone: marked again, not kept
  EXPECT_EQ(c.Get(At(1, 0)), nullptr);
  c.Offer(At(1, 5000), "unit");  // recent: kept
  EXPECT_NE(c.Get(At(1, 5000)), nullptr);
  EXPECT_EQ(c.bytes(), 4u);
}

TEST_F(ReadCacheTest, ConcurrentReadersSeeWholeUnits) {
  ReadCache c(64 * 1000, &metrics_);
  std::vector<std::thread> th;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      for (int i = 0; i < 4000; ++i) {
        const uint64_t off = static_cast<uint64_t>((i * 7 + t) % 100);
        const std::string unit(1000, static_cast<char>('a' + off % 26));
        if (auto held = c.Get(At(1, off))) {
          if (*held != unit) ++bad;
        } else {
          c.Offer(At(1, off), unit);
        }
      }
    });
  for (auto& x : th) x.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(metrics_.read_cache_hits.Value(), 0);  // (the bytes compared were the cache's)
  EXPECT_LE(c.bytes(), 64u * 1000);
}

}  // namespace
}  // namespace ds41
