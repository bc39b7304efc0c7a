// Placement arithmetic (SERVING.md §5): costs in predicted seconds, warm sessions, feasibility,
// random tie-breaks among near ties; the baseline policies; the affinity index; in-flight loads.
#include "router/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "router/inflight_loads.h"
#include "router/prediction_scale.h"
#include "router/rate_profile.h"

namespace ds41 {
namespace {

NodeLoad Node(const std::string& a, int64_t running = 0, int64_t waiting = 0, bool warm = false, int64_t queued = 0) {
  NodeLoad n;
  n.address = a;
  n.running = running;
  n.waiting = waiting;
  n.warm = warm;
  n.queued_tokens = queued;
  return n;
}

PlacementInput In(int64_t prompt, int64_t cached, int window, bool swa) {
  PlacementInput in;
  in.prompt_tokens = prompt;
  in.cached_tokens = cached;
  in.window = window;
  in.swa_available = swa;
  return in;
}

Placer CostPlacer(uint64_t seed, CostModel cm = {}) {
  PlacerOptions o;
  o.cost = cm;
  o.seed = seed;
  return Placer(o);
}

TEST(PlacementTest, WarmDecoderWinsWhenThePrefixIsLarge) {
  CostModel cm;
  Placer placer = CostPlacer(1, cm);
  // 100k cached tokens = 89 MB to move at 1 GB/s: 89 ms, more than the warm node's extra load.
  Placement p = placer.Place(In(100'000, 99'900, 128, true), {Node("a", 4), Node("b", 0, 0, true)}, {Node("e")});
  EXPECT_EQ(p.decoder, "b");
  EXPECT_EQ(p.reason, "warm_session");
  EXPECT_EQ(p.kv_bytes, 0);
  EXPECT_EQ(p.encoder_tokens, 100);
  EXPECT_EQ(p.replay_tokens, 0);
}

TEST(PlacementTest, AffinityIsACostNotAPin) {
  CostModel cm;
  Placer placer = CostPlacer(1, cm);
  // Small prefix, the warm decoder has a long queue of admitted sequences: the idle one wins.
  Placement p = placer.Place(In(300, 200, 128, true), {Node("warm", 10, 40, true), Node("idle")}, {Node("e")});
  EXPECT_EQ(p.decoder, "idle");
  EXPECT_NEAR(p.kv_bytes, 200 * 890.0, 1e-9);
}

TEST(PlacementTest, MissingSwaStateCostsAReplay) {
  CostModel cm;
  Placer placer = CostPlacer(1, cm);
  Placement with = placer.Place(In(1000, 640, 128, true), {Node("d")}, {Node("e")});
  Placement without = placer.Place(In(1000, 640, 128, false), {Node("d")}, {Node("e")});
  EXPECT_EQ(with.replay_tokens, 0);
  EXPECT_EQ(without.replay_tokens, 128);
  EXPECT_NEAR(without.predicted_seconds - with.predicted_seconds, 128 / cm.encoder_replay_tokens_per_s, 1e-12);
  EXPECT_EQ(with.reason, "only_candidate");
}

TEST(PlacementTest, EncoderChosenByQueue) {
  Placer placer = CostPlacer(1);
  Placement p = placer.Place(In(5000, 0, 128, true), {Node("d")}, {Node("busy", 0, 0, false, 20000), Node("free")});
  EXPECT_EQ(p.encoder, "free");
  // Nothing to encode: no encoder needed.
  Placement none = placer.Place(In(5000, 5000, 128, true), {Node("d")}, {Node("e")});
  EXPECT_TRUE(none.encoder.empty());
}

TEST(PlacementTest, FullDecodersAreInfeasible) {
  CostModel cm;
  cm.max_batch = 4;
  Placer placer = CostPlacer(1, cm);
  Placement p = placer.Place(In(10, 0, 128, true), {Node("a", 4), Node("b", 2, 2)}, {Node("e")});
  EXPECT_EQ(p.reason, "no_capacity");
  EXPECT_TRUE(p.decoder.empty());
  Placement q = placer.Place(In(10, 0, 128, true), {Node("a", 4), Node("b", 3)}, {Node("e")});
  EXPECT_EQ(q.decoder, "b");
}

TEST(PlacementTest, NearTiesAreBrokenAtRandom) {
  Placer placer = CostPlacer(7);
  std::map<std::string, int> chosen;
  std::map<std::string, int> reasons;
  for (int i = 0; i < 400; ++i) {
    Placement p = placer.Place(In(2000, 1000, 128, true), {Node("a"), Node("b"), Node("c")}, {Node("e1"), Node("e2")});
    ++chosen[p.decoder + "/" + p.encoder];
    ++reasons[p.reason];
  }
  EXPECT_EQ(chosen.size(), 6u);  // every decoder x encoder pair occurs
  for (const auto& [k, n] : chosen) EXPECT_GT(n, 30) << k;
  EXPECT_EQ(reasons["tie_break"], 400);
}

TEST(PlacementTest, PredictionAddsTheTerms) {
  CostModel cm;
  Placer placer = CostPlacer(1, cm);
  Placement p = placer.Place(In(1128, 1000, 128, true), {Node("d")}, {Node("e", 0, 0, false, 872)});
  const double expect = 1000 * cm.kv_bytes_per_token / cm.kv_bytes_per_s + 128 / cm.decoder_replay_tokens_per_s +
                        cm.DecodeStep(1) + (872 + 128) / cm.encoder_tokens_per_s;
  EXPECT_NEAR(p.predicted_seconds, expect, 1e-12);
  EXPECT_NEAR(p.queue_seconds, 872 / cm.encoder_tokens_per_s, 1e-12);  // the wait behind the encoder's queue
  // A decoder's admitted-but-waiting sequences are queue too; this request's own work is not.
  Placement q = placer.Place(In(1128, 1000, 128, true), {Node("d", 2, 3)}, {Node("e")});
  EXPECT_NEAR(q.queue_seconds, 3 * cm.DecodeStep(2), 1e-12);  // steps of the batch of 2 it waits behind
  EXPECT_GT(q.predicted_seconds, q.queue_seconds);
}

// The rates of a calibrated profile (here, one like the local cluster's): a prefix token a cold
// decoder must load costs more than the step a few more sequences add, so a small prefix is enough
// for warmth to win, and a queue of admitted sequences still outweighs it.
TEST(PlacementTest, ProfileRatesPriceWarmthAgainstTheBatch) {
  RateProfile rp;
  rp.encoder.token_s = 5e-4;
  rp.encoder.replay_token_s = 8e-4;
  rp.decoder.replay_token_s = 1e-4;
  rp.decoder.load_token_s = 4e-5;
  rp.decoder.step_s = 5e-4;
  rp.decoder.step_seq_s = 1e-3;
  rp.decoder.max_running = 32;
  rp.store.shard_bytes_per_s = 1e9;
  rp.network.link_bytes_per_s = 2e9;
  const CostModel cm = CostModelFromProfile(rp);
  EXPECT_DOUBLE_EQ(cm.encoder_tokens_per_s, 2000);
  EXPECT_DOUBLE_EQ(cm.encoder_replay_tokens_per_s, 1250);
  EXPECT_DOUBLE_EQ(cm.decoder_replay_tokens_per_s, 10000);
  EXPECT_DOUBLE_EQ(cm.DecodeStep(3), 5e-4 + 3e-3);
  EXPECT_EQ(cm.max_batch, 32);
  // Per prefix token: 890 B over the slower of shard and link, then its unit decoded.
  EXPECT_NEAR(cm.kv_bytes_per_token / cm.kv_bytes_per_s, 890 / 1e9 + 4e-5, 1e-15);

  Placer placer = CostPlacer(1, cm);
  // 1,000 cached tokens: 41 ms to load on the cold node, against 8 more sequences' steps.
  Placement warm = placer.Place(In(1128, 1000, 128, true), {Node("cold"), Node("warm", 8, 0, true)}, {Node("e")});
  EXPECT_EQ(warm.decoder, "warm");
  EXPECT_EQ(warm.reason, "warm_session");
  // The default model prices those tokens at 1 GB/s (0.9 ms): the less loaded node wins there.
  Placer defaults = CostPlacer(1);
  EXPECT_EQ(defaults.Place(In(1128, 1000, 128, true), {Node("cold"), Node("warm", 8, 0, true)}, {Node("e")}).decoder, "cold");
  // Ten sequences admitted ahead on the warm node wait ten of its steps: the cold node wins.
  EXPECT_EQ(placer.Place(In(1128, 1000, 128, true), {Node("cold"), Node("warm", 8, 10, true)}, {Node("e")}).decoder, "cold");
  // A profile that leaves rates at zero gives fast work, not infinities.
  RateProfile zero;
  zero.encoder.token_s = 0;
  zero.decoder.load_token_s = 0;
  const CostModel z = CostModelFromProfile(zero);
  EXPECT_GT(z.encoder_tokens_per_s, 1e9);
  EXPECT_TRUE(std::isfinite(z.kv_bytes_per_s));
}

Placer PolicyPlacer(PlacementPolicy policy, uint64_t seed = 1) {
  PlacerOptions o;
  o.policy = policy;
  o.seed = seed;
  return Placer(o);
}

TEST(PlacementPolicyTest, NamesRoundTrip) {
  for (PlacementPolicy p : kPlacementPolicies) EXPECT_EQ(ParsePlacementPolicy(PlacementPolicyName(p)), p);
  EXPECT_FALSE(ParsePlacementPolicy("fastest").has_value());
}

TEST(PlacementPolicyTest, RoundRobinCyclesAndSkipsFullDecoders) {
  Placer placer = PolicyPlacer(PlacementPolicy::kRoundRobin);
  std::vector<std::string> seen;
  for (int i = 0; i < 6; ++i) seen.push_back(placer.Place(In(10, 0, 128, true), {Node("a"), Node("b"), Node("c")}, {Node("e")}).decoder);
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
  // b is at its running limit: the turn passes to c.
  Placement p = placer.Place(In(10, 0, 128, true), {Node("a"), Node("b", 64), Node("c")}, {Node("e")});
  EXPECT_EQ(p.decoder, "a");
  p = placer.Place(In(10, 0, 128, true), {Node("a"), Node("b", 64), Node("c")}, {Node("e")});
  EXPECT_EQ(p.decoder, "c");
  EXPECT_EQ(p.reason, "round_robin");
  EXPECT_GT(p.predicted_seconds, 0);  // every policy still reports the cost model's prediction
}

TEST(PlacementPolicyTest, LeastLoadedIgnoresWarmthAndPrefixCost) {
  Placer placer = PolicyPlacer(PlacementPolicy::kLeastLoaded);
  // The cost model would take the warm decoder (100k tokens not to move); least-loaded takes b.
  Placement p = placer.Place(In(100'000, 99'900, 128, true), {Node("warm", 3, 0, true), Node("b", 1, 1)},
                             {Node("e1", 0, 0, false, 500), Node("e2", 0, 0, false, 100)});
  EXPECT_EQ(p.decoder, "b");
  EXPECT_EQ(p.encoder, "e2");
  EXPECT_EQ(p.reason, "least_loaded");
}

TEST(PlacementPolicyTest, StickyKeepsASessionOnItsNodeAndMovesOnlyALostNodesSessions) {
  Placer placer = PolicyPlacer(PlacementPolicy::kSticky);
  std::vector<NodeLoad> four = {Node("a"), Node("b"), Node("c"), Node("d")};
  std::vector<NodeLoad> three = {Node("a"), Node("b"), Node("d")};
  std::map<std::string, int> per_node;
  int moved = 0;
  for (int s = 0; s < 400; ++s) {
    PlacementInput in = In(10, 0, 128, true);
    in.session = "session-" + std::to_string(s);
    const std::string first = placer.Place(in, four, {Node("e")}).decoder;
    EXPECT_EQ(placer.Place(in, four, {Node("e")}).decoder, first);
    ++per_node[first];
    const std::string after = placer.Place(in, three, {Node("e")}).decoder;
    if (first != "c") {
      EXPECT_EQ(after, first) << in.session;
    } else {
      ++moved;
    }
  }
  for (const auto& [node, n] : per_node) EXPECT_GT(n, 60) << node;  // spread: about 100 each
  EXPECT_EQ(moved, per_node["c"]);
}

TEST(PlacementPolicyTest, RandomSpreadsOverFeasibleNodes) {
  Placer placer = PolicyPlacer(PlacementPolicy::kRandom, 3);
  std::map<std::string, int> n;
  for (int i = 0; i < 300; ++i) ++n[placer.Place(In(10, 0, 128, true), {Node("a"), Node("b"), Node("full", 64)}, {Node("e")}).decoder];
  EXPECT_EQ(n.count("full"), 0u);
  EXPECT_GT(n["a"], 100);
  EXPECT_GT(n["b"], 100);
}

PlacementInput WithChain(std::vector<int32_t> tokens, int unit) {
  PlacementInput in = In(static_cast<int64_t>(tokens.size()), 0, 128, true);
  in.prefix_chain = PrefixChain(tokens, unit);
  return in;
}

std::vector<int32_t> Tokens(int n, int32_t start) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = start + i;
  return t;
}

TEST(PlacementPolicyTest, PrefixAffinityFollowsServedPrefixesButNotAOneBlockMatch) {
  Placer placer = PolicyPlacer(PlacementPolicy::kPrefixAffinity);
  const std::vector<NodeLoad> decoders = {Node("a"), Node("b")}, encoders = {Node("e1"), Node("e2")};
  // A conversation of 8 units served once: its next turn (10 units, 8 shared) goes back there.
  PlacementInput turn1 = WithChain(Tokens(8 * 16 + 1, 100), 16);
  Placement p1 = placer.Place(turn1, decoders, encoders);
  placer.Served(turn1, p1);
  std::vector<int32_t> t2 = Tokens(8 * 16 + 1, 100);
  t2.pop_back();
  for (int32_t x : Tokens(2 * 16 + 1, 5000)) t2.push_back(x);
  PlacementInput turn2 = WithChain(t2, 16);
  for (int i = 0; i < 20; ++i) {
    Placement p2 = placer.Place(turn2, decoders, encoders);
    EXPECT_EQ(p2.decoder, p1.decoder);
    EXPECT_EQ(p2.encoder, p1.encoder);
    EXPECT_EQ(p2.reason, "prefix_match");
  }
  // Another prompt sharing only the first unit (the common system prompt) is not affinity: least
  // loaded, so the shared head does not pull every request onto one node.
  std::vector<int32_t> other = Tokens(16, 100);
  for (int32_t x : Tokens(9 * 16 + 1, 9000)) other.push_back(x);
  const std::vector<NodeLoad> busy_first = {Node(p1.decoder, 3), Node(p1.decoder == "a" ? "b" : "a", 1)};
  Placement p3 = placer.Place(WithChain(other, 16), busy_first, encoders);
  EXPECT_EQ(p3.reason, "prefix_miss");
  EXPECT_NE(p3.decoder, p1.decoder);
}

TEST(PlacementPolicyTest, PrefixAffinityYieldsToImbalance) {
  Placer placer = PolicyPlacer(PlacementPolicy::kPrefixAffinity);
  PlacementInput in = WithChain(Tokens(4 * 16 + 1, 1), 16);
  Placement served;
  served.decoder = "a";
  served.encoder = "e1";
  placer.Served(in, served);
  Placement p = placer.Place(in, {Node("a", 40), Node("b", 2)}, {Node("e1"), Node("e2")});
  EXPECT_EQ(p.decoder, "b");
  EXPECT_EQ(p.reason, "prefix_balance");
}

TEST(PrefixAffinityIndexTest, MatchesPrefixesAndForgetsTailsFirst) {
  PrefixAffinityIndex idx(6);
  const std::vector<uint64_t> c1 = PrefixChain(Tokens(4 * 8 + 1, 0), 8);  // 4 units
  ASSERT_EQ(c1.size(), 4u);
  idx.Record("n", c1);
  EXPECT_EQ(idx.Matched("n", c1), 4);
  EXPECT_EQ(idx.Matched("m", c1), 0);
  std::vector<int32_t> t = Tokens(2 * 8, 0);
  for (int32_t x : Tokens(3 * 8 + 1, 777)) t.push_back(x);
  const std::vector<uint64_t> c2 = PrefixChain(t, 8);  // shares 2 units with c1
  EXPECT_EQ(idx.Matched("n", c2), 2);
  idx.Record("n", c2);  // 5 units, 2 already held: 7 > 6, c1's oldest tail goes
  EXPECT_EQ(idx.units("n"), 6);
  EXPECT_EQ(idx.Matched("n", c2), 5);
  EXPECT_EQ(idx.Matched("n", c1), 3);
}

// Best searches the chain once for all nodes; it must say what Matched says node by node: the
// longest match among the nodes asked about, and exactly the nodes that have it (nodes left out of
// the question, like ones that cannot take the request, never count). Also after evictions and
// re-served prefixes, which leave stale touches in the nodes' queues.
TEST(PrefixAffinityIndexTest, BestAgreesWithMatchedNodeByNode) {
  std::mt19937_64 rng(5);
  std::vector<std::vector<uint64_t>> conversations(6);
  for (auto& c : conversations) {
    c.resize(40);
    for (uint64_t& h : c) h = rng();
  }
  auto chain = [&] {
    const auto& c = conversations[rng() % conversations.size()];
    std::vector<uint64_t> out(c.begin(), c.begin() + static_cast<ptrdiff_t>(rng() % c.size()));
    for (size_t i = 0, extra = rng() % 6; i < extra; ++i) out.push_back(rng());
    if (out.empty()) out.push_back(rng());
    return out;
  };
  for (int64_t capacity : {int64_t{1} << 20, int64_t{60}}) {
    SCOPED_TRACE(capacity);
    PrefixAffinityIndex idx(capacity);
    std::vector<std::string> names;
    for (int i = 0; i < 12; ++i) names.push_back("n" + std::to_string(i));
    int checked = 0, matched = 0;
    for (int round = 0; round < 400; ++round) {
      idx.Record(names[rng() % names.size()], chain());
      const std::vector<uint64_t> q = chain();
      std::vector<const std::string*> asked;
      for (const std::string& n : names) {
        if (rng() % 4 != 0) asked.push_back(&n);  // some nodes cannot take it
      }
      int64_t want = 0;
      for (const std::string* n : asked) want = std::max(want, idx.Matched(*n, q));
      std::vector<char> at_best;
      const int64_t got = idx.Best(asked, q, &at_best);
      if (capacity > 1000) {  // nothing evicted: every node's units are whole prefixes
        ASSERT_EQ(got, want) << round;
        for (size_t i = 0; i < asked.size(); ++i) {
          EXPECT_EQ(at_best[i] != 0, want > 0 && idx.Matched(*asked[i], q) == want) << round << " " << *asked[i];
        }
      } else {  // a node's evicted head may hide the rest from both searches alike, never invent a match
        for (size_t i = 0; i < asked.size(); ++i) {
          if (at_best[i]) {
            EXPECT_GE(idx.Matched(*asked[i], q), 1) << round;
          }
        }
      }
      ++checked;
      matched += want > 0;
    }
    EXPECT_EQ(checked, 400);
    EXPECT_GT(matched, 100);  // the case is not vacuous
    for (const std::string& n : names) EXPECT_LE(idx.units(n), capacity);
  }
}

TEST(PrefixAffinityIndexTest, TenantsChainsNeverMeet) {
  // The router seeds each tenant's chains with its namespace: the same tokens under two tenants
  // share no hash, so one tenant's traffic never draws another's placement.
  const std::vector<int32_t> t = Tokens(4 * 8 + 1, 3);
  const std::vector<uint64_t> a = PrefixChain(t, 8, 1), b = PrefixChain(t, 8, 2);
  ASSERT_EQ(a.size(), 4u);
  for (uint64_t h : a) EXPECT_EQ(std::count(b.begin(), b.end(), h), 0);
  EXPECT_EQ(PrefixChain(t, 8, 1), a);
  PrefixAffinityIndex idx(16);
  idx.Record("n", a);
  EXPECT_EQ(idx.Matched("n", b), 0);
}

TEST(PredictionScaleTest, ObservedOverPredictedOverTheWindowNeverBelowOne) {
  PredictionScale scale(/*window=*/4, /*min_samples=*/2, /*max_scale=*/10);
  EXPECT_EQ(scale.Scale(), 1.0);
  scale.Add(1.0, 3.0);
  EXPECT_EQ(scale.Scale(), 1.0);  // too few samples
  scale.Add(1.0, 1.0);
  EXPECT_DOUBLE_EQ(scale.Scale(), 2.0);  // (3 + 1) / (1 + 1)
  scale.Add(2.0, 1.0);
  scale.Add(2.0, 1.0);
  EXPECT_DOUBLE_EQ(scale.Scale(), 1.0);  // 6 / 6
  scale.Add(1.0, 0.1);                   // faster than predicted: never below 1 (4 newest: 3.1 / 6)
  EXPECT_DOUBLE_EQ(scale.Scale(), 1.0);
  for (int i = 0; i < 4; ++i) scale.Add(0.1, 50.0);  // the window forgets; the scale is capped
  EXPECT_DOUBLE_EQ(scale.Scale(), 10.0);
  scale.Add(0.0, 1.0);  // not a sample
  scale.Add(1.0, -1.0);
  EXPECT_DOUBLE_EQ(scale.Scale(), 10.0);
}

TEST(InflightLoadsTest, RaisesStalePolledLoadsToWhatThisRouterSent) {
  InflightLoads inflight;
  Placement p;
  p.decoder = "d";
  p.encoder = "e";
  p.encoder_tokens = 700;
  inflight.Started(p);
  inflight.Started(p);
  std::vector<NodeLoad> d = {Node("d"), Node("other", 5)}, e = {Node("e")};
  inflight.Apply(&d, &e);
  EXPECT_EQ(d[0].running + d[0].waiting, 2);
  EXPECT_EQ(d[1].running + d[1].waiting, 5);
  EXPECT_EQ(e[0].queued_tokens, 1400);
  inflight.Prefilled(p);
  inflight.Ended(p, /*prefilled=*/true);
  inflight.Ended(p, /*prefilled=*/false);
  d = {Node("d", 1)};
  e = {Node("e", 0, 0, false, 300)};
  inflight.Apply(&d, &e);
  EXPECT_EQ(d[0].waiting, 0);  // polled load already covers it
  EXPECT_EQ(e[0].queued_tokens, 300);
}

// A queue that drained just after a poll must not look full until the next one (overload shedding
// would refuse requests to idle nodes): what this router saw finish after the poll leaves its counts.
TEST(InflightLoadsTest, WorkSeenDoneAfterThePollLeavesThePolledLoad) {
  using Clock = InflightLoads::Clock;
  const Clock::time_point t0 = Clock::now();
  InflightLoads inflight;
  Placement a, b;
  a.decoder = b.decoder = "d";
  a.encoder = b.encoder = "e";
  a.encoder_tokens = 3000;
  b.encoder_tokens = 500;
  inflight.Started(a);
  inflight.Started(b);
  inflight.Prefilled(a, t0 - std::chrono::seconds(1));  // before the poll: the report covers it
  inflight.Ended(a, /*prefilled=*/true, t0 + std::chrono::milliseconds(10));
  inflight.Prefilled(b, t0 + std::chrono::milliseconds(20));
  // The poll at t0 saw a's decode and b's prefill (plus 200 tokens another router sent).
  std::vector<NodeLoad> d = {Node("d", 2)}, e = {Node("e", 1, 0, false, 700)};
  d[0].polled_at = e[0].polled_at = t0;
  std::vector<NodeLoad> d2 = d, e2 = e;
  inflight.Apply(&d, &e);
  EXPECT_EQ(d[0].running, 1);  // a ended after the poll; b still decodes
  EXPECT_EQ(d[0].waiting, 0);
  EXPECT_EQ(e[0].queued_tokens, 200);  // b's 500 prefilled after the poll; a's were already off
  EXPECT_EQ(e[0].running, 0);
  // A load that is not from a poll is only raised, never lowered.
  std::vector<NodeLoad> d3 = {Node("d", 2)}, e3 = {Node("e", 1, 0, false, 700)};
  inflight.Apply(&d3, &e3);
  EXPECT_EQ(d3[0].running, 2);
  EXPECT_EQ(e3[0].queued_tokens, 700);
  // The walk by index agrees, and a later poll covers everything before it.
  inflight.Apply(&d2, &e2, [](const std::string& addr, bool) { return addr == "d" || addr == "e" ? 0 : -1; });
  EXPECT_EQ(d2[0].running, 1);
  EXPECT_EQ(e2[0].queued_tokens, 200);
  std::vector<NodeLoad> d4 = {Node("d", 1)}, e4 = {Node("e", 0, 0, false, 200)};
  d4[0].polled_at = e4[0].polled_at = t0 + std::chrono::seconds(1);
  inflight.Apply(&d4, &e4);
  EXPECT_EQ(d4[0].running, 1);  // b, still decoding, is this router's own: kept
  EXPECT_EQ(e4[0].queued_tokens, 200);
}

TEST(InflightLoadsTest, ApplyByIndexMatchesApply) {
  InflightLoads inflight;
  Placement p;
  p.decoder = "d1";
  p.encoder = "e0";
  p.encoder_tokens = 700;
  inflight.Started(p);
  p.decoder = "gone";  // not a candidate: skipped either way
  inflight.Started(p);
  std::vector<NodeLoad> d = {Node("d0", 1), Node("d1")}, e = {Node("e0")};
  std::vector<NodeLoad> d2 = d, e2 = e;
  inflight.Apply(&d, &e);
  inflight.Apply(&d2, &e2, [](const std::string& a, bool is_decoder) {
    if (a.size() != 2 || a[0] != (is_decoder ? 'd' : 'e')) return -1;
    return a[1] - '0';
  });
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(d2[i].running, d[i].running);
    EXPECT_EQ(d2[i].waiting, d[i].waiting);
  }
  EXPECT_EQ(d2[1].waiting, 1);
  EXPECT_EQ(e2[0].queued_tokens, e[0].queued_tokens);
  EXPECT_EQ(e2[0].waiting, e[0].waiting);
  EXPECT_EQ(e2[0].queued_tokens, 1400);
}

TEST(PlacementTest, TheEncoderRateIsLearnedFromIdleEncodersOnly) {
  Placer placer = CostPlacer(1);
  const double start = placer.cost().encoder_tokens_per_s;
  Placement busy = placer.Place(In(2000, 0, 128, true), {Node("d")}, {Node("e", 1, 0, false, 30000)});
  EXPECT_FALSE(busy.encoder_idle);
  placer.LearnEncoderRate(busy, 2000, 40.0);  // 40 s of which most was queueing: not a rate
  EXPECT_EQ(placer.cost().encoder_tokens_per_s, start);
  Placement idle = placer.Place(In(2000, 0, 128, true), {Node("d")}, {Node("e")});
  EXPECT_TRUE(idle.encoder_idle);
  placer.LearnEncoderRate(idle, 2000, 2.0);  // 1,000 tokens/s observed
  EXPECT_NEAR(placer.cost().encoder_tokens_per_s, 0.8 * start + 0.2 * 1000, 1e-9);
}

}  // namespace
}  // namespace ds41
