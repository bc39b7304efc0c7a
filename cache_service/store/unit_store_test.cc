#include "cache_service/store/unit_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "tests/support/test_checkpoint.h"
#include "tests/support/test_units.h"
#include "unit/unit_key.h"

namespace ds41 {
namespace {

// A unit of the tiny layout from position 0 whose contents follow `seed`.
std::string UnitBytes(int tokens, uint32_t seed) { return testing::TestUnitBytes(std::string(64, 'a'), 0, tokens, seed); }

Key32 K(int i) {
  Key32 k{};
  k[0] = static_cast<uint8_t>(i);
  k[31] = static_cast<uint8_t>(i * 7);
  return k;
}

// A distinct key for every n (K repeats after 256).
Key32 NumberedKey(int n) {
  Key32 k{};
  std::memcpy(k.data() + 8, &n, sizeof n);
  return k;
}

constexpr int kManyUnits = 60000, kManyBatch = 1000;

// Puts kManyUnits one-token units under NumberedKey(0 .. kManyUnits - 1), kManyBatch at a time.
void PutManyNumbered(UnitStore* s, const Key32& ns) {
  const std::string unit = UnitBytes(1, 7);
  for (int b = 0; b < kManyUnits / kManyBatch; ++b) {
    std::vector<UnitStore::PutItem> items;
    for (int i = 0; i < kManyBatch; ++i) items.push_back({ns, NumberedKey(b * kManyBatch + i), nullptr, 1, unit});
    for (const Status& st : s->PutMany(items)) ASSERT_TRUE(st.ok()) << st.ToString();
  }
}

class UnitStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<UnitStore> OpenStore(uint64_t capacity = 1ull << 30, int64_t ttl = 3600, uint64_t segment_bytes = 1 << 20,
                                       bool direct_io = true, bool sync = false) {
    StoreOptions o;
    o.path = dir_;
    o.direct_io = direct_io;
    o.sync_writes = sync;
    o.capacity_bytes = capacity;
    o.ttl_seconds = ttl;
    o.segment_bytes = segment_bytes;
    o.read_cache_bytes = read_cache_bytes_;
    o.lru_refresh_ms = lru_refresh_ms_;
    o.index_memory_bytes = index_memory_bytes_;
    o.index_cache_bytes = index_cache_bytes_;
    o.clock = &clock_;
    o.files_over_bound = files_over_bound_;
    auto s = UnitStore::Open(o, &metrics_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  // Payload segment files, by name.
  std::vector<std::filesystem::path> Segments() {
    std::vector<std::filesystem::path> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/segments")) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
  uint64_t SegmentBytes() {
    uint64_t n = 0;
    for (const auto& p : Segments()) n += std::filesystem::file_size(p);
    return n;
  }
  // The payload files hold `payload` bytes: exactly, but for the zero padding of O_DIRECT writes
  // (under one 4 KiB block) that the segment being appended to may end in until it is finished.
  ::testing::AssertionResult SegmentsHold(uint64_t payload) {
    const uint64_t n = SegmentBytes();
    if (n >= payload && n < payload + 4096) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "segment files hold " << n << " bytes, payload is " << payload;
  }
  bool Has(UnitStore* s, int i) {
    auto g = s->Get(ns_, K(i));
    EXPECT_TRUE(g.ok());
    return g->has_value();
  }

  std::string dir_ = testing::TempDir("store");
  uint64_t read_cache_bytes_ = 1 << 30;
  int64_t lru_refresh_ms_ = 1000;  // (the tests of eviction order move the clock by seconds)
  uint64_t index_memory_bytes_ = StoreOptions{}.index_memory_bytes;
  uint64_t index_cache_bytes_ = StoreOptions{}.index_cache_bytes;
  std::function<void()> files_over_bound_;
  ManualClock clock_;
  prometheus::Registry registry_;
  StoreMetrics metrics_{registry_};
  Key32 ns_ = K(200);

  // Many units in one call share one index write (and, with O_DIRECT, segment writes), span segments,
  // and read back as if put one by one, in either write mode.
  void PutManyAcrossSegments(bool direct, bool sync) {
    std::vector<std::string> units;
    for (int i = 0; i < 40; ++i) units.push_back(UnitBytes(64, static_cast<uint8_t>(i)));
    const std::string tail = UnitBytes(10, 99);
    const Key32 parent = K(39);
    std::vector<UnitStore::PutItem> items;
    for (int i = 0; i < 40; ++i) items.push_back({ns_, K(i), nullptr, 64, units[i]});
    items.push_back({ns_, K(100), &parent, 10, tail});
    {
      auto s = OpenStore(1ull << 30, 3600, /*segment_bytes=*/7 * units[0].size(), direct, sync);  // the call spans segments
      const std::vector<Status> st = s->PutMany(items);
      ASSERT_EQ(st.size(), items.size());
      for (const Status& x : st) EXPECT_TRUE(x.ok()) << x.ToString();
      EXPECT_EQ(s->stats().units, 41u);
      EXPECT_EQ(metrics_.units_written.Value(), 41);
      // Every payload byte was written once; the call spans 6 segments.
      uint64_t payload = 0;
      for (const auto& it : items) payload += it.unit.size();
      const auto writes = metrics_.segment_write_bytes.Collect().histogram;
      EXPECT_EQ(writes.sample_sum, static_cast<double>(payload));
      EXPECT_GE(writes.sample_count, 6u);
      if (s->DirectIo()) {
        EXPECT_LT(writes.sample_count, items.size()) << "the units were not grouped into shared writes";
      }
      EXPECT_TRUE(SegmentsHold(payload));
      EXPECT_GE(Segments().size(), 6u);
      for (int i = 0; i < 40; ++i) EXPECT_EQ(**s->Get(ns_, K(i)), units[i]) << i;
      auto p = s->Lookup(ns_, {K(39)});
      ASSERT_TRUE(p.ok());
      ASSERT_EQ((*p)[0].tails.size(), 1u);
      EXPECT_EQ((*p)[0].tails[0].key, K(100));
      EXPECT_EQ((*p)[0].tails[0].tokens, 10u);
    }
    auto s = OpenStore(1ull << 30, 3600, 7 * units[0].size(), direct, sync);  // and all of it was durable
    EXPECT_EQ(s->stats().units, 41u);
    EXPECT_EQ(**s->Get(ns_, K(100)), tail);
  }
};

TEST_F(UnitStoreTest, RoundTripAndRecovery) {
  const std::string a = UnitBytes(64, 3), b = UnitBytes(20, 4);
  {
    auto s = OpenStore();
    ASSERT_TRUE(s->Put(ns_, K(1), nullptr, 64, a).ok());
    const Key32 parent = K(1);
    ASSERT_TRUE(s->Put(ns_, K(2), &parent, 20, b).ok());
    EXPECT_EQ(**s->Get(ns_, K(1)), a);
    EXPECT_EQ(**s->Get(ns_, K(2)), b);
    EXPECT_FALSE(s->Get(ns_, K(3))->has_value());
    EXPECT_FALSE(s->Get(K(9), K(1))->has_value());  // another namespace sees nothing
    auto p = s->Lookup(ns_, {K(1), K(3)});
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE((*p)[0].present);
    EXPECT_EQ((*p)[0].tokens, 64u);
    ASSERT_EQ((*p)[0].tails.size(), 1u);
    EXPECT_EQ((*p)[0].tails[0].key, K(2));
    EXPECT_EQ((*p)[0].tails[0].tokens, 20u);
    EXPECT_FALSE((*p)[1].present);
    EXPECT_EQ(s->stats().units, 2u);
  }
  auto s = OpenStore();  // reopen: recovered from the index
  EXPECT_EQ(s->stats().units, 2u);
  EXPECT_EQ(s->stats().bytes, a.size() + b.size());
  EXPECT_EQ(metrics_.recovered_units.Value(), 2);
  EXPECT_EQ(**s->Get(ns_, K(2)), b);
}

TEST_F(UnitStoreTest, PutManyStoresEveryUnitAndItsTail) { PutManyAcrossSegments(/*direct=*/true, /*sync=*/false); }
TEST_F(UnitStoreTest, PutManyThroughThePageCacheWithSync) { PutManyAcrossSegments(/*direct=*/false, /*sync=*/true); }

TEST_F(UnitStoreTest, PutManyWithAKeyTwiceKeepsTheLater) {
  const std::string a = UnitBytes(64, 1), b = UnitBytes(64, 2), c = UnitBytes(64, 3);
  auto s = OpenStore();
  const std::vector<Status> st = s->PutMany({{ns_, K(1), nullptr, 64, a}, {ns_, K(2), nullptr, 64, b}, {ns_, K(1), nullptr, 64, c}});
  for (const Status& x : st) EXPECT_TRUE(x.ok()) << x.ToString();
  EXPECT_EQ(**s->Get(ns_, K(1)), c);
  EXPECT_EQ(**s->Get(ns_, K(2)), b);
  EXPECT_EQ(s->stats().units, 2u);
  EXPECT_EQ(s->stats().bytes, b.size() + c.size());
  ASSERT_TRUE(s->Compact().ok());
  EXPECT_TRUE(SegmentsHold(b.size() + c.size()));  // the replaced payload was released
}

TEST_F(UnitStoreTest, TtlExpiresIdleUnits) {
  auto s = OpenStore(1ull << 30, /*ttl=*/100);
  ASSERT_TRUE(s->Put(ns_, K(1), nullptr, 64, UnitBytes(64, 1)).ok());
  clock_.AdvanceMs(60'000);
  ASSERT_TRUE(s->Put(ns_, K(2), nullptr, 64, UnitBytes(64, 2)).ok());
  clock_.AdvanceMs(50'000);  // K(1) idle 110 s, K(2) 50 s
  EXPECT_EQ(*s->EvictExpired(), 1u);
  EXPECT_FALSE(Has(s.get(), 1));
  EXPECT_TRUE(Has(s.get(), 2));  // this read refreshes K(2)
  clock_.AdvanceMs(99'000);
  EXPECT_EQ(*s->EvictExpired(), 0u);
  clock_.AdvanceMs(2'000);
  EXPECT_EQ(*s->EvictExpired(), 1u);
  EXPECT_EQ(metrics_.evictions_ttl.Value(), 2);
  EXPECT_EQ(s->stats().units, 0u);
}

TEST_F(UnitStoreTest, CapacityEvictsLeastRecentlyUsedFirst) {
  const std::string u = UnitBytes(64, 5);
  auto s = OpenStore(/*capacity=*/4 * u.size());
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(s->Put(ns_, K(i), nullptr, 64, u).ok());
    clock_.AdvanceMs(2000);
  }
  EXPECT_TRUE(Has(s.get(), 1));  // K(1) becomes the most recently used
  clock_.AdvanceMs(2000);
  ASSERT_TRUE(s->Put(ns_, K(5), nullptr, 64, u).ok());  // over capacity: K(2) goes
  EXPECT_FALSE(Has(s.get(), 2));
  clock_.AdvanceMs(2000);
  ASSERT_TRUE(s->Put(ns_, K(6), nullptr, 64, u).ok());  // then K(3)
  EXPECT_FALSE(Has(s.get(), 3));
  for (int i : {1, 4, 5, 6}) EXPECT_TRUE(Has(s.get(), i)) << i;
  EXPECT_EQ(metrics_.evictions_capacity.Value(), 2);
  EXPECT_LE(s->stats().bytes, 4 * u.size());
}

// With the default interval a read refreshes its unit's recency only when the last refresh (or its
// put) is a minute old or more: a unit read half a minute after its put is evicted as if unread.
TEST_F(UnitStoreTest, ReadsRefreshRecencyOncePerInterval) {
  lru_refresh_ms_ = StoreOptions{}.lru_refresh_ms;
  ASSERT_EQ(lru_refresh_ms_, 60'000);
  const std::string u = UnitBytes(64, 6);
  auto s = OpenStore(/*capacity=*/3 * u.size());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(s->Put(ns_, K(i), nullptr, 64, u).ok());
    clock_.AdvanceMs(1000);
  }
  clock_.AdvanceMs(27'000);
  EXPECT_TRUE(Has(s.get(), 1));  // 30 s after its put: no refresh
  ASSERT_TRUE(s->Put(ns_, K(4), nullptr, 64, u).ok());  // over capacity: K(1) goes all the same
  EXPECT_FALSE(Has(s.get(), 1));
  clock_.AdvanceMs(70'000);
  EXPECT_TRUE(Has(s.get(), 2));  // 99 s after its put: refreshed
  ASSERT_TRUE(s->Put(ns_, K(5), nullptr, 64, u).ok());  // so K(3) goes
  EXPECT_FALSE(Has(s.get(), 3));
  for (int i : {2, 4, 5}) EXPECT_TRUE(Has(s.get(), i)) << i;
  EXPECT_EQ(metrics_.evictions_capacity.Value(), 2);
}

// Reads refresh recency in batches (many keys, several stripes locked at once) while puts and
// evictions run on other threads: nothing deadlocks and the accounting matches what is stored.
TEST_F(UnitStoreTest, BatchedReadRefreshesUnderConcurrentPutsAndEvictions) {
  const std::string u = UnitBytes(64, 9);
  // Segments of ~3 units: appends rotate files and removals drop them while other threads read.
  auto s = OpenStore(/*capacity=*/20 * u.size(), /*ttl=*/3600, /*segment_bytes=*/3 * u.size());
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const int key = (i * 7 + t * 13) % 50;
        if (i % 3 == 0) {
          ASSERT_TRUE(s->Put(ns_, K(key), nullptr, 64, u).ok());
        } else {
          ASSERT_TRUE(s->Get(ns_, K(key)).ok());
        }
        if (i % 50 == 0) clock_.AdvanceMs(1500);  // makes the next reads refreshes
      }
    });
  std::atomic<bool> done{false};
  std::thread compactor([&] {  // segment compaction moves units while they are read, replaced and evicted
    while (!done) ASSERT_TRUE(s->Compact().ok());
  });
  for (auto& t : th) t.join();
  done = true;
  compactor.join();
  ASSERT_TRUE(s->EvictExpired().ok());
  uint64_t present = 0;
  for (int i = 0; i < 50; ++i) {
    const bool has = Has(s.get(), i);
    // A refresh never brings back the index entry of a unit removed meanwhile.
    EXPECT_EQ(has, (*s->Lookup(ns_, {K(i)}))[0].present) << i;
    present += has ? 1 : 0;
  }
  EXPECT_EQ(present, s->stats().units);
  EXPECT_EQ(present * u.size(), s->stats().bytes);
  EXPECT_LE(s->stats().bytes, 20 * u.size());
  EXPECT_GT(present, 0u);
  // Segment accounting kept up: once compacted, the payload files hold exactly the live units.
  ASSERT_TRUE(s->Compact().ok());
  EXPECT_TRUE(SegmentsHold(present * u.size()));
  for (int i = 0; i < 50; ++i) {
    if (auto g = s->Get(ns_, K(i)); g.ok() && g->has_value()) {
      EXPECT_EQ(**g, u) << i;
    }
  }
}

TEST_F(UnitStoreTest, CorruptedUnitIsAMissDeletedAndCounted) {
  const std::string good = UnitBytes(64, 7);
  {
    auto s = OpenStore();
    ASSERT_TRUE(s->Put(ns_, K(1), nullptr, 64, good).ok());
    ASSERT_TRUE(s->Put(ns_, K(2), nullptr, 64, good).ok());
  }
  {  // Flip one payload byte of the first unit behind the store's back.
    const auto segs = Segments();
    ASSERT_EQ(segs.size(), 1u);
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(good.size() / 2));
    const char c = static_cast<char>(f.get());
    f.seekp(static_cast<std::streamoff>(good.size() / 2));
    f.put(static_cast<char>(c ^ 0x40));
  }
  auto s = OpenStore();
  EXPECT_FALSE(Has(s.get(), 1));
  EXPECT_EQ(metrics_.checksum_failures.Value(), 1);
  EXPECT_FALSE((*s->Lookup(ns_, {K(1)}))[0].present);  // deleted, not just hidden
  EXPECT_EQ(s->stats().units, 1u);
  EXPECT_TRUE(Has(s.get(), 2));
}

// GetMany answers each key in order, as Get would, with a chain's units read together: a corrupt
// one among them is a counted miss and deleted, its neighbours are served; read often enough, all
// come from RAM.
TEST_F(UnitStoreTest, GetManyServesAChainAndMissesOnlyItsCorruptUnit) {
  constexpr int kChain = 30;
  std::vector<std::string> units;
  for (int i = 0; i < kChain; ++i) units.push_back(UnitBytes(64, static_cast<uint8_t>(i + 1)));
  {
    auto s = OpenStore(1ull << 30, 3600, /*segment_bytes=*/64 << 20);
    std::vector<UnitStore::PutItem> items;
    for (int i = 0; i < kChain; ++i) items.push_back({ns_, K(i), nullptr, 64, units[i]});
    for (const Status& st : s->PutMany(items)) ASSERT_TRUE(st.ok()) << st.ToString();
  }
  {  // Flip a payload byte of unit 5 (the units lie in put order in the one segment).
    const auto segs = Segments();
    ASSERT_EQ(segs.size(), 1u);
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(5 * units[0].size() + units[0].size() / 2);
    f.seekg(at);
    const char c = static_cast<char>(f.get());
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x40));
  }
  auto s = OpenStore(1ull << 30, 3600, 64 << 20);
  std::vector<Key32> keys;
  for (int i = kChain - 1; i >= 0; --i) keys.push_back(K(i));  // (not in the segment's order)
  keys.push_back(K(150));  // never put
  keys.push_back(K(7));    // twice
  for (int round = 0; round < 3; ++round) {  // device, device (kept by the read cache), RAM
    const auto got = s->GetMany(ns_, keys);
    ASSERT_EQ(got.size(), keys.size());
    for (int k = 0; k < kChain; ++k) {
      const int i = kChain - 1 - k;
      ASSERT_TRUE(got[k].ok()) << got[k].status().ToString();
      if (i == 5) {
        EXPECT_FALSE(got[k]->has_value());
      } else {
        ASSERT_TRUE(got[k]->has_value()) << i;
        EXPECT_TRUE(**got[k] == units[i]) << i;
      }
    }
    EXPECT_FALSE(got[kChain].value().has_value());
    ASSERT_TRUE(got[kChain + 1].ok() && got[kChain + 1]->has_value());
    EXPECT_TRUE(**got[kChain + 1] == units[7]);
  }
  EXPECT_EQ(metrics_.checksum_failures.Value(), 1);
  EXPECT_FALSE((*s->Lookup(ns_, {K(5)}))[0].present);  // deleted
  EXPECT_EQ(s->stats().units, static_cast<uint64_t>(kChain - 1));
  EXPECT_GE(metrics_.read_cache_hits.Value(), kChain - 1);  // the third round came from RAM
  EXPECT_EQ(metrics_.units_read.Value(), 3 * kChain);       // 29 + the repeated one, each round
}

// A unit read again comes from RAM (counted); a unit replaced or removed leaves the read cache at
// once, and one that compaction moves keeps its place in it.
TEST_F(UnitStoreTest, UnitsReadAgainComeFromTheReadCacheWhileIndexed) {
  const std::string u = UnitBytes(64, 9), v = UnitBytes(64, 10);
  auto s = OpenStore(1ull << 30, 3600, /*segment_bytes=*/8 * u.size());
  ASSERT_TRUE(s->Put(ns_, K(1), nullptr, 64, u).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(**s->Get(ns_, K(1)), u);  // device, device (kept), RAM
  EXPECT_EQ(metrics_.read_cache_hits.Value(), 1);
  EXPECT_EQ(metrics_.read_cache_bytes.Value(), static_cast<double>(u.size()));
  // Replaced: the new bytes come from the device, the old ones leave RAM.
  ASSERT_TRUE(s->Put(ns_, K(1), nullptr, 64, v).ok());
  EXPECT_EQ(metrics_.read_cache_bytes.Value(), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(**s->Get(ns_, K(1)), v);
  EXPECT_EQ(metrics_.read_cache_hits.Value(), 2);
  // Moved by compaction (its segment made mostly dead by another namespace's removal): still a hit.
  const Key32 other = K(201);
  for (int i = 2; i < 6; ++i) ASSERT_TRUE(s->Put(other, K(i), nullptr, 64, u).ok());
  ASSERT_TRUE(s->DeleteNamespace(other).ok());
  ASSERT_TRUE(s->Compact().ok());
  EXPECT_EQ(**s->Get(ns_, K(1)), v);
  EXPECT_EQ(metrics_.read_cache_hits.Value(), 3);
  EXPECT_GT(metrics_.compacted_bytes.Value(), 0);  // (it was moved)
  // Removed: its RAM goes with it.
  ASSERT_TRUE(s->DeleteNamespace(ns_).ok());
  EXPECT_EQ(metrics_.read_cache_bytes.Value(), 0);
  EXPECT_FALSE(Has(s.get(), 1));
}

TEST_F(UnitStoreTest, WithoutAReadCacheEveryReadGoesToTheDevice) {
  read_cache_bytes_ = 0;
  const std::string u = UnitBytes(64, 11);
  auto s = OpenStore();
  ASSERT_TRUE(s->Put(ns_, K(1), nullptr, 64, u).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(**s->Get(ns_, K(1)), u);
  EXPECT_EQ(metrics_.read_cache_hits.Value(), 0);
  EXPECT_EQ(metrics_.read_cache_bytes.Value(), 0);
  EXPECT_EQ(metrics_.read_cache_budget_bytes.Value(), 0);
}

// A segment cut short (a lost tail): units past the cut are dropped at open, the rest are served.
TEST_F(UnitStoreTest, TruncatedSegmentLosesOnlyTheUnitsPastTheCut) {
  const std::string u = UnitBytes(64, 8);
  {
    auto s = OpenStore();
    for (int i = 1; i <= 3; ++i) ASSERT_TRUE(s->Put(ns_, K(i), nullptr, 64, u).ok());
  }
  std::filesystem::resize_file(Segments()[0], 2 * u.size() + 10);
  auto s = OpenStore();
  EXPECT_EQ(s->stats().units, 2u);
  EXPECT_EQ(**s->Get(ns_, K(1)), u);
  EXPECT_EQ(**s->Get(ns_, K(2)), u);
  EXPECT_FALSE(Has(s.get(), 3));
  EXPECT_FALSE((*s->Lookup(ns_, {K(3)}))[0].present);
}

// Payload files follow the live units: a file goes with its last unit, compaction moves the live
// units out of partly dead files, and bytes appended but never indexed are dropped at open.
TEST_F(UnitStoreTest, SegmentFilesAreReclaimed) {
  const std::string u = UnitBytes(64, 6);
  const Key32 other = K(77);
  {
    auto s = OpenStore(1ull << 30, 3600, /*segment_bytes=*/2 * u.size());  // two units a file
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(s->Put(i % 2 ? other : ns_, K(i), nullptr, 64, u).ok());
    EXPECT_EQ(Segments().size(), 3u);
    EXPECT_EQ(*s->DeleteNamespace(other), 3u);  // one unit of each file: all half dead
    EXPECT_EQ(Segments().size(), 3u);
    EXPECT_TRUE(SegmentsHold(6 * u.size()));
    ASSERT_TRUE(s->Compact().ok());
    EXPECT_TRUE(SegmentsHold(3 * u.size()));  // the three live units, copied forward
    EXPECT_EQ(metrics_.compacted_bytes.Value(), 3.0 * static_cast<double>(u.size()));
    EXPECT_EQ(*s->DeleteNamespace(ns_), 3u);
    EXPECT_TRUE(SegmentsHold(u.size()));  // the files went with their last unit, but the one being appended to
    ASSERT_TRUE(s->Compact().ok());       // which compaction closes
    EXPECT_TRUE(SegmentsHold(0u));
    for (int i = 10; i < 13; ++i) ASSERT_TRUE(s->Put(ns_, K(i), nullptr, 64, u).ok());
  }
  // A stray segment (as left by a crash between a payload write and its index entry).
  std::ofstream(dir_ + "/segments/000000999.seg") << std::string(1000, 'x');
  {
    auto s = OpenStore(1ull << 30, 3600, 2 * u.size());
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/segments/000000999.seg"));
    EXPECT_EQ(s->stats().units, 3u);
    for (int i = 10; i < 13; ++i) EXPECT_EQ(**s->Get(ns_, K(i)), u) << i;
    ASSERT_TRUE(s->Put(ns_, K(20), nullptr, 64, u).ok());  // new files are numbered past the stray one
    EXPECT_GT(Segments().back().filename().string(), "000000999.seg");
  }
}

// Compaction empties its victims one after another, each file gone before the next one's units are
// copied: the disk holds at most one victim's live bytes more than before. (Moved in the index's key
// order, every victim's units were copied side by side and each file stayed until the scan's end.)
TEST_F(UnitStoreTest, CompactionEmptiesOneSegmentAtATime) {
  const std::string u = UnitBytes(64, 5);
  const Key32 other = K(77);
  constexpr int kFiles = 10;
  // Four units a file: three of ns_, keyed so that the index's order visits every file's first
  // unit, then every file's second, ...; the fourth of `other`.
  auto key = [](int file, int slot) {
    Key32 k{};
    k[0] = static_cast<uint8_t>(slot);
    k[1] = static_cast<uint8_t>(file);
    return k;
  };
  auto s = OpenStore(1ull << 30, 3600, /*segment_bytes=*/4 * u.size());
  for (int f = 0; f < kFiles; ++f) {
    for (int slot = 0; slot < 3; ++slot) ASSERT_TRUE(s->Put(ns_, key(f, slot), nullptr, 64, u).ok());
    ASSERT_TRUE(s->Put(other, key(f, 3), nullptr, 64, u).ok());
  }
  ASSERT_EQ(Segments().size(), static_cast<size_t>(kFiles));
  EXPECT_EQ(*s->DeleteNamespace(other), static_cast<uint64_t>(kFiles));  // every file three quarters live
  const double before = metrics_.segment_peak_bytes.Value();
  EXPECT_EQ(before, 4.0 * kFiles * static_cast<double>(u.size()));
  ASSERT_TRUE(s->Compact().ok());
  EXPECT_EQ(metrics_.compacted_bytes.Value(), 3.0 * kFiles * static_cast<double>(u.size()));
  EXPECT_TRUE(SegmentsHold(3 * kFiles * u.size()));
  EXPECT_LE(metrics_.segment_peak_bytes.Value(), before + 3.0 * static_cast<double>(u.size()))
      << "victims were copied side by side";
  for (int f = 0; f < kFiles; ++f)
    for (int slot = 0; slot < 3; ++slot) EXPECT_EQ(**s->Get(ns_, key(f, slot)), u) << f << " " << slot;
}

// Capacity eviction leaves dead bytes in old segments; once the files outgrow the capacity, the
// periodic sweep rewrites even segments that are half live, so the disk stays near the capacity.
TEST_F(UnitStoreTest, SweepKeepsSegmentFilesNearTheCapacity) {
  const std::string u = UnitBytes(64, 4);
  auto s = OpenStore(/*capacity=*/10 * u.size(), /*ttl=*/0, /*segment_bytes=*/4 * u.size());
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(s->Put(ns_, K(i), nullptr, 64, u).ok());
    clock_.AdvanceMs(2000);
  }
  EXPECT_EQ(metrics_.evictions_capacity.Value(), 2);  // units 0 and 1: the first file is half live
  EXPECT_TRUE(SegmentsHold(12 * u.size()));
  EXPECT_EQ(*s->EvictExpired(), 0u);  // no TTL; the sweep compacts
  EXPECT_TRUE(SegmentsHold(10 * u.size()));
  for (int i = 2; i < 12; ++i) EXPECT_EQ(**s->Get(ns_, K(i)), u) << i;
}

// A write burst passes the capacity faster than a periodic sweep reclaims the dead bytes eviction
// leaves in segments that still hold a live unit: past capacity + 4 segments every put says so
// (files_over_bound), and not before.
TEST_F(UnitStoreTest, PutsSayWhenTheSegmentFilesPassTheirBound) {
  const std::string u = UnitBytes(64, 4);
  int calls = 0;
  files_over_bound_ = [&calls] { ++calls; };
  auto s = OpenStore(/*capacity=*/10 * u.size(), /*ttl=*/0, /*segment_bytes=*/2 * u.size());
  // Two units a segment; the even ones are read after every put, so eviction takes the odd ones and
  // every segment stays half live (a shared prefix's unit beside a one-off's).
  auto put = [&](int i) {
    ASSERT_TRUE(s->Put(ns_, K(i), nullptr, 64, u).ok());
    clock_.AdvanceMs(2000);
    for (int e = 0; e <= i; e += 2) ASSERT_TRUE(s->Get(ns_, K(e)).ok());
  };
  int i = 0;
  for (; i < 16; ++i) put(i);
  EXPECT_EQ(calls, 0) << "16 units: the files are within capacity + 4 segments";
  for (; i < 20; ++i) put(i);
  EXPECT_GT(calls, 0);
  EXPECT_GT(SegmentBytes(), 18 * u.size());  // ten live units in ten half-dead segments
  ASSERT_TRUE(s->EvictExpired().ok());  // what the woken sweep runs
  EXPECT_LE(SegmentBytes(), 12 * u.size() + 4096);
  const int before = calls;
  put(i);
  EXPECT_EQ(calls, before) << "back within the bound, puts stay quiet";
}

// A store written by the first format (payloads inside RocksDB) is refused with a clear error,
// never misread.
// The index's memtables stay within their budget however many units are written, and the write-ahead
// logs within twice it: RocksDB's defaults (64 MiB a column family) would hold all of this in RAM.
TEST_F(UnitStoreTest, IndexMemoryAndLogsStayWithinTheirBudget) {
  index_memory_bytes_ = 4 << 20;
  auto s = OpenStore();
  PutManyNumbered(s.get(), ns_);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(s->stats().units, static_cast<uint64_t>(kManyUnits));
  const double memtables = metrics_.index_memory_bytes.Value();
  EXPECT_GT(memtables, 0);
  EXPECT_LE(memtables, 1.25 * index_memory_bytes_);
  EXPECT_EQ(metrics_.index_memory_budget_bytes.Value(), static_cast<double>(index_memory_bytes_));
  uint64_t logs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    if (e.path().extension() == ".log") logs += std::filesystem::file_size(e.path());
  EXPECT_LE(logs, 2 * index_memory_bytes_ + (1 << 20)) << "write-ahead logs";
}

// What RocksDB reads from its tables (index entries, and the tables' index and filter blocks) stays
// in the one block cache and within its budget: by default each table factory would get a cache of
// its own and every table's index and filter blocks would sit outside any, growing with the tables.
TEST_F(UnitStoreTest, IndexCacheHoldsWhatRocksDbReadsWithinItsBudget) {
  index_memory_bytes_ = 4 << 20;
  index_cache_bytes_ = 1 << 20;
  auto s = OpenStore();
  PutManyNumbered(s.get(), ns_);
  ASSERT_FALSE(HasFatalFailure());
  for (int b = 0; b < kManyUnits / kManyBatch; ++b) {  // the index entries, mostly flushed into tables by now
    std::vector<Key32> keys;
    for (int i = 0; i < kManyBatch; ++i) keys.push_back(NumberedKey(b * kManyBatch + i));
    for (const auto& got : s->GetMany(ns_, keys)) ASSERT_TRUE(got.ok() && got->has_value());
  }
  // A put publishes the gauges.
  ASSERT_TRUE(s->PutMany({{ns_, NumberedKey(kManyUnits), nullptr, 1, UnitBytes(1, 7)}}).front().ok());
  EXPECT_EQ(metrics_.index_cache_budget_bytes.Value(), static_cast<double>(index_cache_bytes_));
  EXPECT_GT(metrics_.index_cache_bytes.Value(), 0);
  EXPECT_LE(metrics_.index_cache_bytes.Value(), 1.1 * index_cache_bytes_);
  // The open tables keep only their properties outside it: ~11 KB here, ~165 KB when the index and
  // filter blocks stay with the tables.
  EXPECT_LT(metrics_.table_reader_bytes.Value(), 64 << 10);
}

TEST_F(UnitStoreTest, FirstFormatStoreIsRefused) {
  {
    rocksdb::DB* db = nullptr;
    rocksdb::DBOptions o;
    o.create_if_missing = true;
    o.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {{"default", {}}, {"units", {}}, {"index", {}}, {"lru", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    ASSERT_TRUE(rocksdb::DB::Open(o, dir_, cfs, &h, &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), h[2], std::string(64, 'k'), std::string(25, '\0')).ok());
    for (auto* c : h) ASSERT_TRUE(db->DestroyColumnFamilyHandle(c).ok());
    delete db;
  }
  StoreOptions o;
  o.path = dir_;
  auto s = UnitStore::Open(o, &metrics_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("older ds41"), std::string::npos) << s.status().ToString();
}

TEST_F(UnitStoreTest, DeleteNamespaceRemovesOnlyThatNamespace) {
  auto s = OpenStore();
  const std::string u = UnitBytes(64, 1);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s->Put(ns_, K(i), nullptr, 64, u).ok());
  ASSERT_TRUE(s->Put(K(77), K(1), nullptr, 64, u).ok());
  EXPECT_EQ(*s->DeleteNamespace(ns_), 5u);
  EXPECT_EQ(s->stats().units, 1u);
  EXPECT_FALSE(Has(s.get(), 3));
  EXPECT_TRUE(s->Get(K(77), K(1))->has_value());
}

}  // namespace
}  // namespace ds41
