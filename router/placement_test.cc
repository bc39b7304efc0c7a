// Placement arithmetic (SERVING.md §5): costs in predicted seconds, warm sessions, feasibility,
// random tie-breaks among near ties.
#include "router/placement.h"

#include <gtest/gtest.h>

#include <map>

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

TEST(PlacementTest, WarmDecoderWinsWhenThePrefixIsLarge) {
  std::mt19937_64 rng(1);
  CostModel cm;
  // 100k cached tokens = 89 MB to move at 1 GB/s: 89 ms, more than the warm node's extra load.
  Placement p = Place({100'000, 99'900, 128, true}, {Node("a", 4), Node("b", 0, 0, true)}, {Node("e")}, cm, rng);
  EXPECT_EQ(p.decoder, "b");
  EXPECT_EQ(p.reason, "warm_session");
  EXPECT_EQ(p.kv_bytes, 0);
  EXPECT_EQ(p.encoder_tokens, 100);
  EXPECT_EQ(p.replay_tokens, 0);
}

TEST(PlacementTest, AffinityIsACostNotAPin) {
  std::mt19937_64 rng(1);
  CostModel cm;
  // Small prefix, the warm decoder has a long queue of admitted sequences: the idle one wins.
  Placement p = Place({300, 200, 128, true}, {Node("warm", 10, 40, true), Node("idle")}, {Node("e")}, cm, rng);
  EXPECT_EQ(p.decoder, "idle");
  EXPECT_NEAR(p.kv_bytes, 200 * 890.0, 1e-9);
}

TEST(PlacementTest, MissingSwaStateCostsAReplay) {
  std::mt19937_64 rng(1);
  CostModel cm;
  Placement with = Place({1000, 640, 128, true}, {Node("d")}, {Node("e")}, cm, rng);
  Placement without = Place({1000, 640, 128, false}, {Node("d")}, {Node("e")}, cm, rng);
  EXPECT_EQ(with.replay_tokens, 0);
  EXPECT_EQ(without.replay_tokens, 128);
  EXPECT_NEAR(without.predicted_seconds - with.predicted_seconds, 128 / cm.encoder_replay_tokens_per_s, 1e-12);
  EXPECT_EQ(with.reason, "only_candidate");
}

TEST(PlacementTest, EncoderChosenByQueue) {
  std::mt19937_64 rng(1);
  Placement p = Place({5000, 0, 128, true}, {Node("d")}, {Node("busy", 0, 0, false, 20000), Node("free")}, CostModel{}, rng);
  EXPECT_EQ(p.encoder, "free");
  // Nothing to encode: no encoder needed.
  Placement none = Place({5000, 5000, 128, true}, {Node("d")}, {Node("e")}, CostModel{}, rng);
  EXPECT_TRUE(none.encoder.empty());
}

TEST(PlacementTest, FullDecodersAreInfeasible) {
  std::mt19937_64 rng(1);
  CostModel cm;
  cm.max_batch = 4;
  Placement p = Place({10, 0, 128, true}, {Node("a", 4), Node("b", 2, 2)}, {Node("e")}, cm, rng);
  EXPECT_EQ(p.reason, "no_capacity");
  EXPECT_TRUE(p.decoder.empty());
  Placement q = Place({10, 0, 128, true}, {Node("a", 4), Node("b", 3)}, {Node("e")}, cm, rng);
  EXPECT_EQ(q.decoder, "b");
}

TEST(PlacementTest, NearTiesAreBrokenAtRandom) {
  std::mt19937_64 rng(7);
  std::map<std::string, int> chosen;
  std::map<std::string, int> reasons;
  for (int i = 0; i < 400; ++i) {
    Placement p = Place({2000, 1000, 128, true}, {Node("a"), Node("b"), Node("c")}, {Node("e1"), Node("e2")}, CostModel{}, rng);
    ++chosen[p.decoder + "/" + p.encoder];
    ++reasons[p.reason];
  }
  EXPECT_EQ(chosen.size(), 6u);  // every decoder x encoder pair occurs
  for (const auto& [k, n] : chosen) EXPECT_GT(n, 30) << k;
  EXPECT_EQ(reasons["tie_break"], 400);
}

TEST(PlacementTest, PredictionAddsTheTerms) {
  std::mt19937_64 rng(1);
  CostModel cm;
  Placement p = Place({1128, 1000, 128, true}, {Node("d")}, {Node("e", 0, 0, false, 872)}, cm, rng);
  const double expect = 1000 * cm.kv_bytes_per_token / cm.kv_bytes_per_s + 128 / cm.decoder_replay_tokens_per_s +
                        cm.decode_step_s + (872 + 128) / cm.encoder_tokens_per_s;
  EXPECT_NEAR(p.predicted_seconds, expect, 1e-12);
}

}  // namespace
}  // namespace ds41
