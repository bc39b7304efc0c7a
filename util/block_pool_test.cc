#include "util/block_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "util/process.h"

namespace ds41 {
namespace {

constexpr size_t kBlock = 4 << 20;

TEST(BlockPoolTest, TheBlockGivenLastIsTakenFirst) {
  BlockPool pool(kBlock, std::chrono::hours(1));
  IoBuffer a = pool.Take(), b = pool.Take();
  uint8_t* const pb = b.get();
  std::memset(a.get(), 1, kBlock);
  std::memset(b.get(), 2, kBlock);
  pool.Give(std::move(a));
  pool.Give(std::move(b));
  EXPECT_EQ(pool.stats().mapped_bytes, int64_t{2} * kBlock);
  EXPECT_EQ(pool.stats().idle_bytes, int64_t{2} * kBlock);
  IoBuffer again = pool.Take();
  EXPECT_EQ(again.get(), pb);  // the one still warm in the caches
  EXPECT_EQ(pool.stats().allocated, 2u);
  EXPECT_EQ(pool.stats().idle_bytes, int64_t{kBlock});
  pool.Give(std::move(again));
}

// Blocks that stay idle past the release time go back to the kernel: resident memory comes down by
// them, and the pool counts them gone.
TEST(BlockPoolTest, IdleBlocksGoBackToTheKernel) {
  BlockPool pool(kBlock, std::chrono::seconds(1));  // (long enough for a loaded machine's pauses)
  std::vector<IoBuffer> out;
  for (int i = 0; i < 10; ++i) {
    out.push_back(pool.Take());
    std::memset(out.back().get(), 1, kBlock);
  }
  const uint64_t peak = ResidentBytes();
  for (IoBuffer& b : out) pool.Give(std::move(b));
  pool.ReleaseIdle();
  EXPECT_EQ(pool.stats().released, 0u) << "released before the idle time";
  EXPECT_GT(ResidentBytes() + (8 << 20), peak);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  pool.ReleaseIdle();
  const BlockPool::Stats s = pool.stats();
  EXPECT_EQ(s.released, 10u);
  EXPECT_EQ(s.mapped_bytes, 0);
  EXPECT_LT(ResidentBytes() + (32 << 20), peak) << "the idle blocks stayed resident";
}

// A block in use is never released, however long it is out; only the idle ones past their time go,
// the most recently given staying.
TEST(BlockPoolTest, OnlyBlocksIdlePastTheirTimeGo) {
  BlockPool pool(kBlock, std::chrono::seconds(1));  // (long enough for a loaded machine's pauses)
  IoBuffer held = pool.Take();
  IoBuffer old = pool.Take();
  pool.Give(std::move(old));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  IoBuffer recent = pool.Take();  // the old one is released here, and a fresh block allocated
  EXPECT_EQ(pool.stats().released, 1u);
  EXPECT_EQ(pool.stats().allocated, 3u);
  pool.Give(std::move(recent));
  pool.ReleaseIdle();
  EXPECT_EQ(pool.stats().idle_bytes, int64_t{kBlock});
  EXPECT_EQ(pool.stats().mapped_bytes, int64_t{2} * kBlock);
  std::memset(held.get(), 3, kBlock);  // still ours
  pool.Give(std::move(held));
}

TEST(BlockPoolTest, ManyThreadsTakeAndGive) {
  BlockPool pool(2 << 20, std::chrono::milliseconds(1));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 200; ++i) {
        IoBuffer b = pool.Take();
        std::memset(b.get(), t, 4096);
        pool.Give(std::move(b));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const BlockPool::Stats s = pool.stats();
  EXPECT_EQ(s.mapped_bytes, s.idle_bytes);  // all back
  EXPECT_LE(s.allocated, s.released + 8) << "more blocks than threads at once";
}

}  // namespace
}  // namespace ds41
