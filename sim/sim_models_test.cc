// The simulator's parts by themselves: the host CPU's sharing, the store's LRU, TTL and tails, a
// decoder's warm sessions under its byte budget, the encoder's shared steps, the index, the fit.
// (The profile file's own test is router/rate_profile_test.cc.)
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "router/rate_profile.h"
#include "sim/byte_lru.h"
#include "sim/decoder_model.h"
#include "sim/encoder_model.h"
#include "sim/event_queue.h"
#include "sim/flat_index.h"
#include "sim/host_cpu.h"
#include "sim/kv_store.h"
#include "sim/least_squares.h"

namespace ds41::sim {
namespace {

// Records when each event arrives.
struct Recorder : EventSink {
  explicit Recorder(EventQueue* q) : q(q) {}
  void OnEvent(uint32_t kind, uint64_t a, uint64_t) override { done[a] = q->now(); }
  EventQueue* q;
  std::unordered_map<uint64_t, double> done;
};

TEST(EventQueueTest, RunsInTimeThenSchedulingOrder) {
  EventQueue q;
  std::vector<uint64_t> order;
  struct Sink : EventSink {
    std::vector<uint64_t>* order;
    void OnEvent(uint32_t, uint64_t a, uint64_t) override { order->push_back(a); }
  } sink;
  sink.order = &order;
  q.At(2, &sink, 0, 1);
  q.At(1, &sink, 0, 2);
  q.At(2, &sink, 0, 3);
  q.At(1, &sink, 0, 4);
  while (q.Step()) {
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 4, 1, 3}));
  EXPECT_EQ(q.now(), 2);
}

TEST(HostCpuTest, SharesCoresEquallyAmongRunningJobs) {
  for (int cores : {0, 1, 2}) {
    EventQueue q;
    HostCpu cpu(&q, cores);
    Recorder r(&q);
    cpu.Run(1.0, &r, 0, 1);
    cpu.Run(1.0, &r, 0, 2);
    cpu.Run(1.0, &r, 0, 3);
    while (q.Step()) {
    }
    // 0: each its own core; 1: three jobs at 1/3 speed; 2: three at 2/3 speed.
    const double expect = cores == 0 ? 1.0 : 3.0 / cores;
    for (uint64_t j : {1, 2, 3}) EXPECT_NEAR(r.done[j], expect, 1e-12) << cores;
  }
  // A short job beside a long one on one core: both at half speed until the short one ends at 2,
  // then the long one alone: 2 + (3 - 1) = 4.
  EventQueue q;
  HostCpu cpu(&q, 1);
  Recorder r(&q);
  cpu.Run(3.0, &r, 0, 1);
  cpu.Run(1.0, &r, 0, 2);
  while (q.Step()) {
  }
  EXPECT_NEAR(r.done[2], 2.0, 1e-12);
  EXPECT_NEAR(r.done[1], 4.0, 1e-12);
  EXPECT_NEAR(cpu.work_done_s(), 4.0, 1e-12);
}

WorkloadRequest Prompt(std::vector<int64_t> blocks, int64_t tokens) {
  WorkloadRequest w;
  w.prompt_tokens = tokens;
  w.block_tokens = 64;
  w.blocks = std::move(blocks);
  return w;
}

TEST(KvStoreTest, EvictsTheLeastRecentlyUsedBeyondCapacity) {
  StoreRates rates;
  rates.capacity_bytes = 2 * 64 * 890;  // two units
  rates.ttl_s = 0;
  KvStore store(rates, NetworkRates{}, 890, 64);
  const PrefixKeys a(Prompt({1}, 64)), b(Prompt({2}, 64)), c(Prompt({3}, 64));
  (void)store.Write(a, 0, 64, 0);
  (void)store.Write(b, 0, 64, 1);
  EXPECT_EQ(store.Read(a, 64, 2).reach, 64);  // a is now the most recent
  (void)store.Write(c, 0, 64, 3);             // b goes
  EXPECT_EQ(store.Lookup(a, 64, 4), 64);
  EXPECT_EQ(store.Lookup(b, 64, 4), 0);
  EXPECT_EQ(store.Lookup(c, 64, 4), 64);
  EXPECT_EQ(store.evicted_capacity(), 1u);
}

TEST(KvStoreTest, IdleUnitsExpireAfterTheTtl) {
  StoreRates rates;
  rates.ttl_s = 10;
  KvStore store(rates, NetworkRates{}, 890, 64);
  const PrefixKeys a(Prompt({1, 2}, 128)), b(Prompt({3}, 64));
  (void)store.Write(a, 0, 128, 0);
  (void)store.Write(b, 0, 64, 0);
  EXPECT_EQ(store.Read(a, 64, 8).reach, 64);  // touches a's first unit only
  EXPECT_EQ(store.Lookup(a, 128, 15), 64);    // its second unit idled 15 s: gone
  EXPECT_EQ(store.Lookup(b, 64, 15), 0);
  EXPECT_EQ(store.Lookup(a, 128, 19), 0);     // the first idled 11 s since its read
}

TEST(KvStoreTest, LookupStopsAtTheFirstMissingUnitAndFindsTails) {
  KvStore store(StoreRates{}, NetworkRates{}, 890, 64);
  const PrefixKeys first(Prompt({1, 2, 3, 4}, 200));
  (void)store.Write(first, 0, 200, 0);  // units at 64, 128, 192 and a tail at 200
  const PrefixKeys longer(Prompt({1, 2, 3, 4, 5}, 300));
  EXPECT_EQ(store.Lookup(longer, 299, 1), 200);
  EXPECT_EQ(store.Lookup(longer, 199, 1), 192);  // the tail is past the limit
  const PrefixKeys other(Prompt({1, 2, 9}, 180));
  EXPECT_EQ(store.Lookup(other, 179, 1), 128);  // block 3 differs
  const StoreTransfer t = store.Read(longer, 200, 1);
  EXPECT_EQ(t.reach, 200);
  EXPECT_EQ(t.bytes, 200u * 890u);
  // 178,000 bytes through the default shard (1 GB/s, slower than the 1.25 GB/s link).
  EXPECT_NEAR(t.done_at, 1 + 178000 / 1e9, 1e-12);
}

TEST(KvStoreTest, AShardServesItsTransfersOneAfterAnother) {
  StoreRates rates;
  rates.shards = 1;
  rates.shard_bytes_per_s = 64 * 890;  // one unit a second
  NetworkRates net;
  net.link_bytes_per_s = 1e18;
  KvStore store(rates, net, 890, 64);
  const StoreTransfer w1 = store.Write(PrefixKeys(Prompt({1, 2}, 128)), 0, 128, 0);
  const StoreTransfer w2 = store.Write(PrefixKeys(Prompt({3}, 64)), 0, 64, 0);
  EXPECT_NEAR(w1.done_at, 2, 1e-9);
  EXPECT_NEAR(w2.done_at, 3, 1e-9);  // queued behind the first
}

struct NullListener : DecoderModel::Listener {
  void OnToken(int, uint64_t, double) override {}
};

TEST(DecoderModelTest, WarmSessionsStayWithinTheByteBudget) {
  RateProfile p;
  p.decoder.state_bytes_per_token = 1;
  p.decoder.state_fixed_bytes = 0;
  p.decoder.session_bytes = 250;
  p.decoder.session_ttl_s = 100;
  EventQueue q;
  HostCpu cpu(&q, 0);
  WarmDirectory warm(4);
  NullListener l;
  DecoderModel d(0, &q, &cpu, &p, &warm, &l);
  auto agrees = [](const WarmTurn&) { return true; };
  d.KeepWarm(1, WarmTurn{0, 100, 100});
  d.KeepWarm(2, WarmTurn{1, 100, 100});
  EXPECT_EQ(d.resident_bytes(), 200u);
  d.KeepWarm(3, WarmTurn{2, 100, 100});  // 300 > 250: session 1, the least recent, goes
  EXPECT_EQ(d.resident_bytes(), 200u);
  EXPECT_FALSE(d.TakeWarm(1, 500, 64, agrees).has_value());
  std::vector<int64_t> seen;
  warm.VisibleAt(1, 0, [&](int, int64_t length) { seen.push_back(length); });
  EXPECT_TRUE(seen.empty());  // the polls no longer show it
  warm.VisibleAt(2, 0, [&](int, int64_t length) { seen.push_back(length); });
  EXPECT_EQ(seen, std::vector<int64_t>{100});
  // Take's rules: at least the boundary, no longer than the prompt, agreeing with it.
  EXPECT_FALSE(d.TakeWarm(2, 99, 64, agrees).has_value());    // longer than the prompt
  EXPECT_FALSE(d.TakeWarm(2, 500, 128, agrees).has_value());  // shorter than the boundary
  EXPECT_FALSE(d.TakeWarm(2, 500, 64, [](const WarmTurn&) { return false; }).has_value());
  EXPECT_TRUE(d.TakeWarm(2, 500, 64, agrees).has_value());
  EXPECT_FALSE(d.TakeWarm(2, 500, 64, agrees).has_value());  // taken
  EXPECT_EQ(d.resident_bytes(), 100u);
}

TEST(DecoderModelTest, AdmissionRefusedBeyondMaxRunning) {
  RateProfile p;
  p.decoder.max_running = 2;
  EventQueue q;
  HostCpu cpu(&q, 0);
  WarmDirectory warm(1);
  NullListener l;
  DecoderModel d(0, &q, &cpu, &p, &warm, &l);
  EXPECT_TRUE(d.TryAdmit());
  EXPECT_TRUE(d.TryAdmit());
  EXPECT_FALSE(d.TryAdmit());
  (void)d.Join(0, 10, 5);  // one leaves waiting for running: still two
  EXPECT_FALSE(d.TryAdmit());
  d.Abandon();
  EXPECT_TRUE(d.TryAdmit());
}

struct PrefillRecorder : EncoderModel::Listener {
  explicit PrefillRecorder(EventQueue* q) : q(q) {}
  void OnPrefilled(int, uint64_t request) override { done[request] = q->now(); }
  EventQueue* q;
  std::unordered_map<uint64_t, double> done;
};

TEST(EncoderModelTest, PrefillsShareEachStepsTokenBudgetOldestFirst) {
  RateProfile p;
  p.encoder.step_tokens = 100;
  p.encoder.step_s = 1;
  p.encoder.token_s = 0.01;
  p.encoder.token_context_s = 0;
  EventQueue q;
  HostCpu cpu(&q, 0);
  PrefillRecorder r(&q);
  EncoderModel e(0, &q, &cpu, &p, &r);
  (void)e.Enqueue(1, 0, 150);  // steps: 100 (2 s), then 50 of it + 50 of the next
  EXPECT_EQ(e.queued_tokens(), 150);
  (void)e.Enqueue(2, 0, 80);  // joins at the second step
  EXPECT_EQ(e.running(), 2);
  EXPECT_EQ(e.queued_tokens(), 230);
  while (q.Step()) {
  }
  EXPECT_NEAR(r.done[1], 2 + 2, 1e-12);      // 1 + 100 x 0.01, then 1 + 100 x 0.01
  EXPECT_NEAR(r.done[2], 2 + 2 + 1.3, 1e-12);  // its last 30 tokens alone
  EXPECT_EQ(e.queued_tokens(), 0);
  EXPECT_EQ(e.steps(), 3u);
}

TEST(FlatIndexTest, BehavesAsAMapUnderInsertsAndErases) {
  FlatIndex f;
  std::unordered_map<uint64_t, int32_t> m;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t k = rng() % 5000;  // collisions and reuse
    if (rng() % 3 == 0) {
      EXPECT_EQ(f.Erase(k), m.erase(k) == 1);
    } else {
      const int32_t v = static_cast<int32_t>(rng() % 1000);
      f.Put(k, v);
      m[k] = v;
    }
  }
  EXPECT_EQ(f.size(), m.size());
  for (uint64_t k = 0; k < 5000; ++k) {
    auto it = m.find(k);
    EXPECT_EQ(f.Find(k), it == m.end() ? -1 : it->second);
  }
}

TEST(ByteLruTest, ReplacingAnEntryKeepsTheByteCount) {
  ByteLru<int> lru(100, 0);
  lru.Put(1, 60, 1, 0);
  lru.Put(1, 30, 2, 1);
  EXPECT_EQ(lru.bytes(), 30u);
  lru.Put(2, 60, 3, 2);
  EXPECT_EQ(lru.bytes(), 90u);
  ASSERT_NE(lru.Find(1, 3), nullptr);
  EXPECT_EQ(*lru.Find(1, 3), 2);
  lru.Put(3, 20, 4, 4);  // 110 > 100: key 2 (least recent) goes
  EXPECT_FALSE(lru.Contains(2, 5));
  EXPECT_TRUE(lru.Contains(1, 5));
}

TEST(LeastSquaresTest, RecoversCoefficientsAndKeepsThemNonNegative) {
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (double n : {16.0, 64.0, 512.0, 1024.0, 4096.0, 8192.0}) {
    rows.push_back({1, n, n * n});
    y.push_back(0.05 + 7.7e-4 * n + 3.75e-8 * n * n);
  }
  const Fit f = NonNegativeLeastSquares(rows, y);
  EXPECT_NEAR(f.coef[0], 0.05, 1e-6);
  EXPECT_NEAR(f.coef[1], 7.7e-4, 1e-9);
  EXPECT_NEAR(f.coef[2], 3.75e-8, 1e-12);
  // A decreasing series has no non-negative slope: the slope is 0, the intercept the mean.
  const Fit g = NonNegativeLeastSquares({{1, 1}, {1, 2}, {1, 3}}, {3, 2, 1});
  EXPECT_EQ(g.coef[1], 0);
  EXPECT_NEAR(g.coef[0], 2, 1e-9);
}

}  // namespace
}  // namespace ds41::sim
