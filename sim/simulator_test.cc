// The simulator end to end, on cases small enough to compute by hand: an idle cluster's TTFT, CPU
// sharing on one host, the store's scope, placement through the router's real Placer, deadlines,
// and the decoder's planned runs against step-by-step simulation.
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include "router/prefix_affinity.h"
#include "sim/prefix_keys.h"

namespace ds41::sim {
namespace {

// A profile whose every term is easy to add up: no load cost, transfers at 1 us a token.
RateProfile HandProfile(int host_cores) {
  RateProfile p;
  p.host_cores = host_cores;
  p.request_overhead_s = 0.01;
  p.swa_state_bytes = 0;
  p.encoder.step_tokens = 512;
  p.encoder.step_s = 0.001;
  p.encoder.token_s = 1e-4;
  p.encoder.token_context_s = 1e-8;
  p.encoder.replay_token_s = 1e-4;
  p.decoder.step_s = 0.01;
  p.decoder.step_seq_s = 0.001;
  p.decoder.step_context_s = 0;
  p.decoder.replay_token_s = 2e-4;
  p.network.link_bytes_per_s = 890e6;  // 1 us per token of KV
  p.network.latency_s = 0;
  p.store.shard_bytes_per_s = 1e12;
  return p;
}

// A request of `tokens` tokens in 64-token blocks `blocks` (the last one partial when short).
WorkloadRequest Request(int64_t index, double arrival, std::vector<int64_t> blocks, int64_t tokens, int64_t output,
                        std::string session) {
  WorkloadRequest w;
  w.index = index;
  w.arrival_s = arrival;
  w.prompt_tokens = tokens;
  w.output_tokens = output;
  w.block_tokens = 64;
  w.blocks = std::move(blocks);
  w.session = std::move(session);
  return w;
}

SimOptions Options(int encoders, int decoders, PlacementPolicy policy, CacheScope scope = CacheScope::kShared) {
  SimOptions o;
  o.encoders = encoders;
  o.decoders = decoders;
  o.policy = policy;
  o.scope = scope;
  o.seed = 7;
  return o;
}

std::vector<int64_t> Blocks(int64_t first, int64_t count) {
  std::vector<int64_t> b;
  for (int64_t i = 0; i < count; ++i) b.push_back(first + i);
  return b;
}

TEST(SimulatorTest, IdleClusterTtftIsOverheadPrefillHandoffAndReplay) {
  const RateProfile p = HandProfile(0);
  const std::vector<WorkloadRequest> w = {Request(0, 0.5, Blocks(1, 16), 1000, 3, "s1")};
  const SimResult r = Simulate(w, p, Options(1, 1, PlacementPolicy::kCost));
  ASSERT_EQ(r.records.size(), 1u);
  const RequestRecord& rec = r.records[0];
  ASSERT_EQ(rec.outcome, "ok") << rec.error;
  // Two steps (512 + 488 tokens): 2 x 1 ms + 1e-4 x 1000 + 1e-8 x 1000^2 = 0.112 s; the KV of 1000
  // tokens to the decoder: 1 ms; the decoder replay of 128 tokens: 25.6 ms; the overhead: 10 ms.
  EXPECT_NEAR(rec.ttft_s, 0.01 + 0.112 + 0.001 + 0.0256, 1e-9);
  // Two more tokens, one decode step each: 10 ms + 1 ms for one sequence.
  ASSERT_EQ(rec.itl_s.size(), 2u);
  EXPECT_NEAR(rec.itl_s[0], 0.011, 1e-9);
  EXPECT_NEAR(rec.itl_s[1], 0.011, 1e-9);
  EXPECT_EQ(rec.completion_tokens, 3);
  EXPECT_EQ(rec.cached_tokens, 0);
  EXPECT_EQ(rec.computed_tokens, 1000);
  EXPECT_EQ(rec.decoder_replay_tokens, 128);
  EXPECT_EQ(rec.prefix_source, "none");
  EXPECT_EQ(rec.placement_reason, "only_candidate");
  // The stream ends once the reply's units (1002 - 960 = 42 tokens) are stored: 42 us later.
  EXPECT_NEAR(rec.e2e_s, rec.ttft_s + 0.022 + 42e-6, 1e-9);
}

TEST(SimulatorTest, TwoPrefillsOnOneCoreTakeTwiceAsLong) {
  // Two requests at once on two encoders: with their own hardware each prefill takes W; on one
  // shared core both progress at half speed and both take 2W. Everything else is made free.
  auto ttfts = [](int cores) {
    RateProfile p = HandProfile(cores);
    p.request_overhead_s = 0;
    p.decoder.replay_token_s = 0;
    p.network.link_bytes_per_s = 1e18;
    const std::vector<WorkloadRequest> w = {Request(0, 0, Blocks(1, 4), 256, 1, "a"),
                                            Request(1, 0, Blocks(101, 4), 256, 1, "b")};
    const SimResult r = Simulate(w, p, Options(2, 2, PlacementPolicy::kRoundRobin));
    EXPECT_NE(r.records[0].encoder, r.records[1].encoder);
    return std::make_pair(r.records[0].ttft_s, r.records[1].ttft_s);
  };
  const double work = 0.001 + 1e-4 * 256 + 1e-8 * 256 * 256;
  const auto own = ttfts(0);
  EXPECT_NEAR(own.first, work, 1e-9);
  EXPECT_NEAR(own.second, work, 1e-9);
  const auto shared = ttfts(1);
  EXPECT_NEAR(shared.first, 2 * work, 1e-9);
  EXPECT_NEAR(shared.second, 2 * work, 1e-9);
  const auto two_cores = ttfts(2);  // two cores for two jobs: no slowdown
  EXPECT_NEAR(two_cores.first, work, 1e-9);
}

TEST(SimulatorTest, SecondTurnHitsTheSharedStoreAndMissesAnotherNodesCache) {
  // Turn 2 extends turn 1's 192-token prompt; round-robin sends it to the other encoder.
  const std::vector<WorkloadRequest> w = {Request(0, 0, Blocks(1, 3), 192, 2, "s"),
                                          Request(1, 5, Blocks(1, 4), 256, 2, "s")};
  const RateProfile p = HandProfile(0);
  const SimResult shared = Simulate(w, p, Options(2, 2, PlacementPolicy::kRoundRobin, CacheScope::kShared));
  EXPECT_EQ(shared.records[1].cached_tokens, 192);
  EXPECT_EQ(shared.records[1].computed_tokens, 64);
  EXPECT_EQ(shared.records[1].prefix_source, "cache");
  EXPECT_NE(shared.records[0].encoder, shared.records[1].encoder);

  const SimResult per_node = Simulate(w, p, Options(2, 2, PlacementPolicy::kRoundRobin, CacheScope::kPerNode));
  EXPECT_NE(per_node.records[0].encoder, per_node.records[1].encoder);
  EXPECT_EQ(per_node.records[1].cached_tokens, 0);
  EXPECT_EQ(per_node.records[1].computed_tokens, 256);

  // Per-node prefix affinity sends the second turn where the prefix is: it hits there.
  const SimResult affinity = Simulate(w, p, Options(2, 2, PlacementPolicy::kPrefixAffinity, CacheScope::kPerNode));
  EXPECT_EQ(affinity.records[0].encoder, affinity.records[1].encoder);
  EXPECT_EQ(affinity.records[1].cached_tokens, 192);
  EXPECT_EQ(affinity.records[1].placement_reason, "prefix_match");
}

TEST(SimulatorTest, ATurnEndingWhereTheNextTurnCachedHitsItsTailAndSwaState) {
  // Turn 1 ends inside a unit (200 tokens); turn 2 holds all of it: the tail unit makes H = 200,
  // and the encoder that holds the SWA state at 200 (bound by the router) spares the replay.
  const std::vector<WorkloadRequest> w = {Request(0, 0, Blocks(1, 4), 200, 2, "s"),
                                          Request(1, 5, Blocks(1, 5), 300, 2, "s")};
  const SimResult r = Simulate(w, HandProfile(0), Options(2, 2, PlacementPolicy::kRoundRobin));
  EXPECT_EQ(r.records[1].cached_tokens, 200);
  EXPECT_EQ(r.records[1].encoder_replay_tokens, 0);
  // A third request sharing only the first two units: nobody holds the state at 128: a replay.
  const std::vector<WorkloadRequest> w2 = {Request(0, 0, Blocks(1, 4), 200, 2, "s"),
                                           Request(1, 5, {1, 2, 77}, 150, 2, "t")};
  const SimResult r2 = Simulate(w2, HandProfile(0), Options(2, 2, PlacementPolicy::kRoundRobin));
  EXPECT_EQ(r2.records[1].cached_tokens, 128);
  EXPECT_EQ(r2.records[1].encoder_replay_tokens, 128);
}

TEST(SimulatorTest, RoundRobinSpreadsAndTheCostPolicyAvoidsTheBusyEncoder) {
  std::vector<WorkloadRequest> w;
  for (int i = 0; i < 4; ++i) w.push_back(Request(i, 0.1 * i, Blocks(100 * i, 1), 64, 1, "s" + std::to_string(i)));
  const SimResult rr = Simulate(w, HandProfile(0), Options(2, 2, PlacementPolicy::kRoundRobin));
  EXPECT_EQ(rr.records[0].decoder, rr.records[2].decoder);
  EXPECT_EQ(rr.records[1].decoder, rr.records[3].decoder);
  EXPECT_NE(rr.records[0].decoder, rr.records[1].decoder);
  EXPECT_NE(rr.records[0].encoder, rr.records[1].encoder);

  // A long prefill starts at 0 on one encoder; short ones follow before the next poll: the router's
  // in-flight count shows the busy encoder, and the cost policy keeps clear of it.
  std::vector<WorkloadRequest> busy = {Request(0, 0, Blocks(1, 100), 6400, 1, "long")};
  for (int i = 1; i <= 3; ++i) busy.push_back(Request(i, 0.1 * i, Blocks(1000 * i, 1), 64, 1, "s" + std::to_string(i)));
  const SimResult cost = Simulate(busy, HandProfile(0), Options(2, 2, PlacementPolicy::kCost));
  for (int i = 1; i <= 3; ++i) {
    EXPECT_NE(cost.records[static_cast<size_t>(i)].encoder, cost.records[0].encoder) << i;
    EXPECT_LT(cost.records[static_cast<size_t>(i)].ttft_s, 0.1) << i;
  }
}

TEST(SimulatorTest, DeadlinesTimeOutAndFreeTheClientSlot) {
  RateProfile p = HandProfile(0);
  SimOptions o = Options(1, 1, PlacementPolicy::kCost);
  o.deadline_s = 1;
  o.concurrency = 1;
  // The first request's prefill alone takes ~1.05 s; the second waits for the only slot, which
  // frees at its own deadline: it is never sent.
  const std::vector<WorkloadRequest> w = {Request(0, 0, Blocks(1, 100), 6400, 4, "a"),
                                          Request(1, 0, Blocks(200, 1), 64, 1, "b"),
                                          Request(2, 2.0, Blocks(300, 1), 64, 1, "c")};
  const SimResult r = Simulate(w, p, o);
  EXPECT_EQ(r.records[0].outcome, "timeout");
  EXPECT_EQ(r.records[0].e2e_s, 1);
  EXPECT_EQ(r.records[1].outcome, "timeout");
  EXPECT_EQ(r.records[1].start_s, -1);  // never sent
  EXPECT_EQ(r.records[2].outcome, "ok");
  // The abandoned prefill left the encoder at its next step: the third one is not stuck behind it.
  EXPECT_LT(r.records[2].ttft_s, 0.2);
}

TEST(SimulatorTest, TheRouterRefusesOverItsLimitOnArrivalAndAStreamHoldsNoWorker) {
  RateProfile p = HandProfile(0);
  SimOptions o = Options(1, 1, PlacementPolicy::kCost);
  o.concurrency = 10;
  o.router_workers = 1;
  o.router_max_running = 2;
  // Three at once, each streaming 40 tokens: the third is over the limit and answered 429 on
  // arrival; the second does not wait for the first's whole reply for the one worker (it is
  // freed once the first is placed).
  const std::vector<WorkloadRequest> w = {Request(0, 0, Blocks(1, 1), 64, 40, "a"), Request(1, 0, Blocks(100, 1), 64, 40, "b"),
                                          Request(2, 0, Blocks(200, 1), 64, 40, "c")};
  const SimResult r = Simulate(w, p, o);
  EXPECT_EQ(r.records[0].outcome, "ok");
  EXPECT_EQ(r.records[1].outcome, "ok");
  EXPECT_EQ(r.records[2].outcome, "rejected");
  EXPECT_EQ(r.records[2].http_status, 429);
  EXPECT_LT(r.records[2].e2e_s, 1e-3);
  EXPECT_LT(r.records[1].ttft_s, r.records[0].e2e_s);
}

// The simulated router refuses as the router does (one DecideAttempt): a new request predicted to
// wait longer than --max-queue-seconds behind queued work is 429 with the router's message, and a
// first token predicted past the router's deadline is its 504.
TEST(SimulatorTest, TheRouterShedsByPredictedWaitAndDeadlineAsTheRouterDoes) {
  RateProfile p = HandProfile(0);
  SimOptions o = Options(1, 1, PlacementPolicy::kCost);
  o.concurrency = 10;
  o.router_max_queue_s = 2;
  // Five 6,400-token prompts at once on one encoder: at the cost model's default 4,000 tokens a
  // second, the second waits 1.6 s behind the first, the third 3.2 s.
  std::vector<WorkloadRequest> w;
  for (int i = 0; i < 5; ++i) w.push_back(Request(i, 0, Blocks(1000 * (i + 1), 100), 6400, 2, "s" + std::to_string(i)));
  const SimResult shed = Simulate(w, p, o);
  EXPECT_EQ(shed.records[0].outcome, "ok");
  EXPECT_EQ(shed.records[1].outcome, "ok");
  for (int i = 2; i < 5; ++i) {
    EXPECT_EQ(shed.records[i].outcome, "rejected") << i;
    EXPECT_EQ(shed.records[i].http_status, 429);
    EXPECT_EQ(shed.records[i].error.rfind("overloaded: the predicted wait behind queued work", 0), 0u) << shed.records[i].error;
  }
  o.router_max_queue_s = 0;  // no shedding: all five are served
  for (const RequestRecord& r : Simulate(w, p, o).records) EXPECT_EQ(r.outcome, "ok");
  o.router_timeout_s = 1;  // each alone is predicted at 1.6 s
  const SimResult late = Simulate({w[0]}, p, o);
  EXPECT_EQ(late.records[0].outcome, "failed");
  EXPECT_EQ(late.records[0].http_status, 504);
  EXPECT_NE(late.records[0].error.find("the predicted time to the first token"), std::string::npos) << late.records[0].error;
}

TEST(SimulatorTest, APlannedRunOfStepsEqualsStepByStep) {
  // host_cores 0 plans runs of steps; a host with more cores than jobs steps one event at a time
  // at full speed. Joins and leaves at all times (staggered arrivals, varied outputs) must give the
  // same token times.
  std::vector<WorkloadRequest> w;
  for (int i = 0; i < 40; ++i)
    w.push_back(Request(i, 0.037 * i, Blocks(10 * i, 2), 100 + 3 * i, 5 + (i * 7) % 23, "s" + std::to_string(i % 9)));
  RateProfile p = HandProfile(0);
  p.decoder.step_context_s = 1e-6;
  const SimResult planned = Simulate(w, p, Options(2, 3, PlacementPolicy::kRoundRobin));
  p.host_cores = 1000;
  const SimResult stepped = Simulate(w, p, Options(2, 3, PlacementPolicy::kRoundRobin));
  ASSERT_EQ(planned.records.size(), stepped.records.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const RequestRecord& a = planned.records[i];
    const RequestRecord& b = stepped.records[i];
    ASSERT_EQ(a.outcome, "ok");
    EXPECT_NEAR(a.ttft_s, b.ttft_s, 1e-9) << i;
    EXPECT_NEAR(a.e2e_s, b.e2e_s, 1e-9) << i;
    ASSERT_EQ(a.itl_s.size(), b.itl_s.size()) << i;
    for (size_t g = 0; g < a.itl_s.size(); ++g) EXPECT_NEAR(a.itl_s[g], b.itl_s[g], 1e-9) << i << " gap " << g;
  }
  EXPECT_LT(planned.facts.events, stepped.facts.events);
}

TEST(SimulatorTest, TheWarmDecoderServesTheSessionsNextTurn) {
  // Turn 1 (one output token: the context ends at the prompt's end); turn 2 extends it exactly, so
  // H = 8192 and the decoder that holds the session there is warm: placed there, no store read.
  // (8192 tokens: moving the prefix, 7.3 ms, must cost more than the near-tie margin, 2.6 ms.)
  const std::vector<WorkloadRequest> w = {Request(0, 0, Blocks(1, 128), 8192, 1, "s"),
                                          Request(1, 5, Blocks(1, 129), 8256, 1, "s")};
  const SimResult r = Simulate(w, HandProfile(0), Options(2, 4, PlacementPolicy::kCost));
  EXPECT_EQ(r.records[1].decoder, r.records[0].decoder);
  EXPECT_EQ(r.records[1].placement_reason, "warm_session");
  EXPECT_EQ(r.records[1].prefix_source, "warm");
  EXPECT_EQ(r.records[1].kv_bytes_read, 0);
}

TEST(SimulatorTest, AWarmSessionThatDisagreesWithThePromptIsNotUsed) {
  // Session a's turn 1 holds 256 tokens; its turn 2 shares only 128 of them but hits 256 through
  // session b's prompt: the warm state covers the boundary yet disagrees there, so the decoder
  // loads the prefix from the store (SessionCache::Take's rule).
  const std::vector<WorkloadRequest> w = {Request(0, 0, {1, 2, 3, 7}, 256, 1, "a"),
                                          Request(1, 1, {1, 2, 4, 5}, 256, 1, "b"),
                                          Request(2, 2, {1, 2, 4, 5, 6}, 320, 1, "a")};
  const SimResult r = Simulate(w, HandProfile(0), Options(1, 1, PlacementPolicy::kCost));
  EXPECT_EQ(r.records[2].cached_tokens, 256);
  EXPECT_EQ(r.records[2].prefix_source, "cache");
  EXPECT_EQ(r.records[2].kv_bytes_read, 256 * 890);
}

TEST(PrefixKeysTest, AgreesWithTheRoutersPrefixChainOnWorkloadTokens) {
  const WorkloadRequest a = Request(0, 0, {5, 6, 7, 8}, 250, 1, "a");
  const WorkloadRequest b = Request(1, 0, {5, 6, 9}, 180, 1, "b");
  const WorkloadRequest c = Request(2, 0, {5, 6, 7, 8, 10}, 300, 1, "c");
  for (int unit : {16, 32, 64, 100}) {
    for (const auto& [x, y] : {std::pair{a, b}, std::pair{a, c}, std::pair{b, c}}) {
      const std::vector<uint64_t> tx = PrefixChain(WorkloadTokens(x, 16, 4096), unit);
      const std::vector<uint64_t> ty = PrefixChain(WorkloadTokens(y, 16, 4096), unit);
      const std::vector<uint64_t> kx = PrefixKeys(x).Chain(unit), ky = PrefixKeys(y).Chain(unit);
      ASSERT_EQ(tx.size(), kx.size());
      for (size_t i = 0; i < std::min(tx.size(), ty.size()); ++i)
        EXPECT_EQ(tx[i] == ty[i], kx[i] == ky[i]) << "unit " << unit << " index " << i;
    }
  }
  EXPECT_EQ(CommonPrefix(a, b), 128);
  EXPECT_EQ(CommonPrefix(a, c), 250);
}

}  // namespace
}  // namespace ds41::sim
