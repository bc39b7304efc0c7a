#include "cache_service/store/unit_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <thread>
#include <vector>

#include "engine/presets.h"
#include "tests/support/test_checkpoint.h"
#include "unit/unit_format.h"
#include "unit/unit_key.h"

namespace ds41 {
namespace {

// Real units of the tiny layout with recognisable contents.
std::string MakeUnitBytes(int tokens, uint8_t fill) {
  auto l = *UnitLayout::FromConfig(TinyConfig(), 64);
  Unit u;
  u.model.fill(1);
  u.tokens = tokens;
  for (const auto& s : l.sources) {
    UnitSource us;
    us.main_kv.assign(static_cast<size_t>(tokens / s.ratio) * s.main_bytes, fill);
    us.index_keys.assign(static_cast<size_t>(tokens / s.ratio) * s.index_bytes, fill);
    us.carry_kv.assign(static_cast<size_t>(tokens % s.ratio) * s.head_dim, 0.0f);
    us.carry_gate = us.carry_kv;
    u.sources.push_back(us);
  }
  return EncodeUnit(l, u);
}

Key32 K(int i) {
  Key32 k{};
  k[0] = static_cast<uint8_t>(i);
  k[31] = static_cast<uint8_t>(i * 7);
  return k;
}

class UnitStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<UnitStore> OpenStore(uint64_t capacity = 1ull << 30, int64_t ttl = 3600) {
    StoreOptions o;
    o.path = dir_;
    o.capacity_bytes = capacity;
    o.ttl_seconds = ttl;
    o.clock = &clock_;
    auto s = UnitStore::Open(o, &metrics_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  bool Has(UnitStore* s, int i) {
    auto g = s->Get(ns_, K(i));
    EXPECT_TRUE(g.ok());
    return g->has_value();
  }

  std::string dir_ = testing::TempDir("store");
  ManualClock clock_;
  prometheus::Registry registry_;
  StoreMetrics metrics_{registry_};
  Key32 ns_ = K(200);
};

TEST_F(UnitStoreTest, RoundTripAndRecovery) {
  const std::string a = MakeUnitBytes(64, 3), b = MakeUnitBytes(20, 4);
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

TEST_F(UnitStoreTest, TtlExpiresIdleUnits) {
  auto s = OpenStore(1ull << 30, /*ttl=*/100);
  ASSERT_TRUE(s->Put(ns_, K(1), nullptr, 64, MakeUnitBytes(64, 1)).ok());
  clock_.AdvanceMs(60'000);
  ASSERT_TRUE(s->Put(ns_, K(2), nullptr, 64, MakeUnitBytes(64, 2)).ok());
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
  const std::string u = MakeUnitBytes(64, 5);
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

// Reads refresh recency in batches (many keys, several stripes locked at once) while puts and
// evictions run on other threads: nothing deadlocks and the accounting matches what is stored.
TEST_F(UnitStoreTest, BatchedReadRefreshesUnderConcurrentPutsAndEvictions) {
  const std::string u = MakeUnitBytes(64, 9);
  auto s = OpenStore(/*capacity=*/20 * u.size());
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
  for (auto& t : th) t.join();
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
}

TEST_F(UnitStoreTest, CorruptedUnitIsAMissDeletedAndCounted) {
  const std::string good = MakeUnitBytes(64, 7);
  {
    auto s = OpenStore();
    ASSERT_TRUE(s->Put(ns_, K(1), nullptr, 64, good).ok());
    ASSERT_TRUE(s->Put(ns_, K(2), nullptr, 64, good).ok());
  }
  {  // Flip one payload byte behind the store's back.
    rocksdb::DB* db = nullptr;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {{"default", {}}, {"units", {}}, {"index", {}}, {"lru", {}}};
    std::vector<rocksdb::ColumnFamilyHandle*> h;
    ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir_, cfs, &h, &db).ok());
    std::string bad = good;
    bad[bad.size() / 2] ^= 0x40;
    std::string key(reinterpret_cast<const char*>(ns_.data()), 32);
    key.append(reinterpret_cast<const char*>(K(1).data()), 32);
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), h[1], key, bad).ok());
    for (auto* c : h) ASSERT_TRUE(db->DestroyColumnFamilyHandle(c).ok());
    delete db;
  }
  auto s = OpenStore();
  EXPECT_FALSE(Has(s.get(), 1));
  EXPECT_EQ(metrics_.checksum_failures.Value(), 1);
  EXPECT_FALSE((*s->Lookup(ns_, {K(1)}))[0].present);  // deleted, not just hidden
  EXPECT_EQ(s->stats().units, 1u);
  EXPECT_TRUE(Has(s.get(), 2));
}

TEST_F(UnitStoreTest, DeleteNamespaceRemovesOnlyThatNamespace) {
  auto s = OpenStore();
  const std::string u = MakeUnitBytes(64, 1);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s->Put(ns_, K(i), nullptr, 64, u).ok());
  ASSERT_TRUE(s->Put(K(77), K(1), nullptr, 64, u).ok());
  EXPECT_EQ(*s->DeleteNamespace(ns_), 5u);
  EXPECT_EQ(s->stats().units, 1u);
  EXPECT_FALSE(Has(s.get(), 3));
  EXPECT_TRUE(s->Get(K(77), K(1))->has_value());
}

}  // namespace
}  // namespace ds41
