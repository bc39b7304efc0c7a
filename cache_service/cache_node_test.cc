// The shard as the binary assembles it: a write burst wakes its sweep long before the sweep's timer,
// so the store's segment files come back near the capacity.
#include "cache_service/cache_node.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/support/test_units.h"

namespace ds41 {
namespace {

Key32 K(int i) {
  Key32 k{};
  k[0] = static_cast<uint8_t>(i);
  k[1] = 0x5a;
  return k;
}

uint64_t SegmentBytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/segments")) n += e.file_size();
  return n;
}

TEST(CacheNodeTest, AWriteBurstWakesTheSweepThatKeepsTheFilesNearTheCapacity) {
  const std::string u = testing::TestUnitBytes(std::string(64, 'a'), 0, 64, 7);
  const std::string dir = ::testing::TempDir() + "/cache_node_test";
  std::filesystem::remove_all(dir);
  CacheNodeOptions o;
  o.store.path = dir;
  o.store.capacity_bytes = 10 * u.size();
  o.store.segment_bytes = 2 * u.size();
  o.store.ttl_seconds = 0;
  o.store.lru_refresh_ms = 0;  // every read moves its unit in the LRU order
  o.data = std::nullopt;
  o.sweep_interval = std::chrono::hours(1);  // the timer alone would not sweep during the test
  prometheus::Registry registry;
  auto node = CacheNode::Start(o, registry);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  UnitStore* s = (*node)->store();
  const Key32 ns = K(200);
  // Half-live segments (the even units read after every put, the odd ones evicted) until the files
  // pass capacity + 4 segments.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(s->Put(ns, K(i), nullptr, 64, u).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (int e = 0; e <= i; e += 2) ASSERT_TRUE(s->Get(ns, K(e)).ok());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (SegmentBytes(dir) > 12 * u.size() + 4096 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_LE(SegmentBytes(dir), 12 * u.size() + 4096) << "the sweep was not woken";
  for (int e = 2; e < 20; e += 2) EXPECT_TRUE(**s->Get(ns, K(e)) == u) << e;
  (*node)->Shutdown();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ds41
