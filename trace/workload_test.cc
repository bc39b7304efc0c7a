// Workloads: scaling keeps the block structure, windows re-base time, replicas are disjoint,
// sessions link turns (never on block 0 alone), tokens follow block ids, and the hit ceiling.
#include "trace/workload.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>

namespace ds41 {
namespace {

TraceRequest T(int64_t ts, int64_t in, int64_t out, std::vector<int64_t> ids) { return {ts, in, out, std::move(ids)}; }

TEST(WorkloadTest, TokenScaleKeepsTheBlockStructure) {
  const std::vector<TraceRequest> trace = {
      T(0, 1100, 100, {0, 1, 2}),  // 3 blocks, the last partial
      T(10, 513, 3, {0, 3}),       // 1 token into its 2nd block: 513/8 rounds to 64, kept at 65
      T(20, 1024, 8, {0, 4}),      // exactly 2 blocks
      T(30, 4, 1, {0}),            // rounds to 0 tokens: at least 1
  };
  const auto w = BuildWorkload(trace, {.token_scale = 0.125});
  ASSERT_EQ(w.size(), 4u);
  for (const WorkloadRequest& r : w) {
    EXPECT_EQ(r.block_tokens, 64);
    const int64_t b = static_cast<int64_t>(r.blocks.size());
    EXPECT_GT(r.prompt_tokens, (b - 1) * 64) << r.index;
    EXPECT_LE(r.prompt_tokens, b * 64) << r.index;
  }
  EXPECT_EQ(w[0].prompt_tokens, 138);  // round(137.5)
  EXPECT_EQ(w[0].output_tokens, 13);   // round(12.5)
  EXPECT_EQ(w[0].blocks, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(w[1].prompt_tokens, 65);
  EXPECT_EQ(w[1].output_tokens, 1);  // round(0.375) = 0, at least 1
  EXPECT_EQ(w[2].prompt_tokens, 128);
  EXPECT_EQ(w[3].prompt_tokens, 1);

  const auto full = BuildWorkload(trace, {});
  EXPECT_EQ(full[0].block_tokens, 512);
  EXPECT_EQ(full[0].prompt_tokens, 1100);
  EXPECT_EQ(full[0].output_tokens, 100);
}

TEST(WorkloadTest, TimeScaleAndWindow) {
  const std::vector<TraceRequest> trace = {T(0, 10, 1, {0}), T(1500, 10, 1, {0}), T(4000, 10, 1, {0}),
                                           T(9000, 10, 1, {0})};
  const auto slow = BuildWorkload(trace, {.time_scale = 2});
  ASSERT_EQ(slow.size(), 4u);
  EXPECT_DOUBLE_EQ(slow[1].arrival_s, 3.0);
  EXPECT_DOUBLE_EQ(slow[3].arrival_s, 18.0);
  // Trace time [1 s, 5 s): the 2nd and 3rd, re-based so the first is at 0.
  const auto win = BuildWorkload(trace, {.time_scale = 0.5, .start_s = 1, .duration_s = 4});
  ASSERT_EQ(win.size(), 2u);
  EXPECT_DOUBLE_EQ(win[0].arrival_s, 0);
  EXPECT_DOUBLE_EQ(win[1].arrival_s, 1.25);
  EXPECT_EQ(win[0].index, 0);
  EXPECT_EQ(win[1].index, 1);
  EXPECT_EQ(BuildWorkload(trace, {.max_requests = 3}).size(), 3u);
}

TEST(WorkloadTest, SessionsLinkTurnsNeverOnBlockZeroAlone) {
  const std::vector<TraceRequest> trace = {
      T(0, 1536, 1, {0, 1, 2}),           // a: 3 complete blocks
      T(1, 2560, 1, {0, 1, 2, 3, 4}),     // a, turn 2
      T(2, 1024, 1, {0, 9}),              // b: 2 complete blocks
      T(3, 600, 1, {0, 5}),               // c: 1 complete block: marks nothing
      T(4, 1300, 1, {0, 5, 6}),           // shares only block 0 with a complete prefix: new session d
      T(5, 3000, 1, {0, 1, 2, 3, 4, 8}),  // a, turn 3 (longest match: turn 2)
      T(6, 1900, 1, {0, 1, 2, 10}),       // a branch of a (turn 1's prefix)
      T(7, 512, 1, {0}),                  // block 0 alone: new session
      T(8, 1500, 1, {0, 9, 11}),          // b, turn 2
      T(9, 1000, 1, {0, 1}),              // a prefix of a's blocks, but a's complete blocks are not its prefix: new
  };
  const auto w = BuildWorkload(trace, {});
  ASSERT_EQ(w.size(), trace.size());
  EXPECT_EQ(w[1].session, w[0].session);
  EXPECT_NE(w[2].session, w[0].session);
  EXPECT_NE(w[3].session, w[0].session);
  EXPECT_NE(w[3].session, w[2].session);
  EXPECT_NE(w[4].session, w[3].session);
  EXPECT_NE(w[4].session, w[0].session);
  EXPECT_NE(w[4].session, w[2].session);
  EXPECT_EQ(w[5].session, w[0].session);
  EXPECT_EQ(w[6].session, w[0].session);
  std::set<std::string> others;
  for (size_t i : {0, 2, 3, 4}) others.insert(w[i].session);
  EXPECT_FALSE(others.count(w[7].session));
  EXPECT_EQ(w[8].session, w[2].session);
  EXPECT_FALSE(others.count(w[9].session));
  EXPECT_NE(w[9].session, w[7].session);
  EXPECT_EQ(w[0].session, "s0");
}

TEST(WorkloadTest, SessionSampleKeepsWholeSessions) {
  const std::vector<TraceRequest> trace = {
      T(1000, 1536, 1, {0, 1, 2}),        // s0
      T(2000, 1024, 1, {0, 9}),           // s1
      T(3000, 2560, 1, {0, 1, 2, 3, 4}),  // s0, turn 2
      T(4000, 1300, 1, {0, 5, 6}),        // s2
      T(5000, 1500, 1, {0, 9, 11}),       // s1, turn 2
      T(6000, 3000, 1, {0, 1, 2, 3, 4, 8}),  // s0, turn 3
  };
  WorkloadOptions o;
  o.session_sample = 2;  // sessions 0 and 2
  const auto w = BuildWorkload(trace, o);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].session, "s0");
  EXPECT_EQ(w[1].session, "s0");
  EXPECT_EQ(w[2].session, "s2");
  EXPECT_EQ(w[3].session, "s0");
  EXPECT_DOUBLE_EQ(w[0].arrival_s, 0);
  EXPECT_DOUBLE_EQ(w[1].arrival_s, 2);
  EXPECT_DOUBLE_EQ(w[3].arrival_s, 5);
  EXPECT_EQ(w[3].index, 3);
  // Every kept request keeps its blocks and length, the first (kept in place) too.
  EXPECT_EQ(w[0].blocks, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(w[0].prompt_tokens, 1536);
  EXPECT_EQ(w[2].blocks, (std::vector<int64_t>{0, 5, 6}));
  EXPECT_EQ(BuildWorkload(trace, {}).size(), trace.size());
}

TEST(WorkloadTest, TheWindowCountsFromTheFilesFirstRequest) {
  // A file whose clock starts at 1,800 s (a day's second half): --start 0 --duration 2 takes its
  // first two seconds.
  const std::vector<TraceRequest> trace = {T(1800000, 512, 1, {0}), T(1801000, 512, 1, {1}), T(1803000, 512, 1, {2})};
  WorkloadOptions o;
  o.duration_s = 2;
  const auto w = BuildWorkload(trace, o);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_DOUBLE_EQ(w[1].arrival_s, 1);
  o.start_s = 3;
  EXPECT_EQ(BuildWorkload(trace, o).size(), 1u);
}

TEST(WorkloadTest, LongestEarlierPrefixWins) {
  // q2's complete blocks come first; q1, a 2-block prompt on q2's path, starts its own session (the
  // node it ends at carried no mark). A later request on both paths joins the longer one, q2.
  const std::vector<TraceRequest> trace = {
      T(0, 2048, 1, {0, 1, 2, 3}),     // q2
      T(1, 1024, 1, {0, 1}),           // q1
      T(2, 2600, 1, {0, 1, 2, 3, 4, 5}),
      T(3, 1300, 1, {0, 1, 9}),
  };
  const auto w = BuildWorkload(trace, {});
  EXPECT_NE(w[1].session, w[0].session);
  EXPECT_EQ(w[2].session, w[0].session);
  EXPECT_EQ(w[3].session, w[1].session);
}

TEST(WorkloadTest, ReplicasAreDisjointAndInterleaved) {
  const std::vector<TraceRequest> trace = {T(0, 1024, 4, {0, 1}), T(1000, 2048, 4, {0, 1, 2, 3}),
                                           T(2000, 1024, 4, {0, 7})};
  const auto one = BuildWorkload(trace, {});
  const auto three = BuildWorkload(trace, {.replicas = 3});
  ASSERT_EQ(three.size(), 9u);
  std::set<std::string> sessions;
  for (size_t i = 0; i < three.size(); ++i) {
    EXPECT_EQ(three[i].index, static_cast<int64_t>(i));
    EXPECT_DOUBLE_EQ(three[i].arrival_s, one[i / 3].arrival_s);
    EXPECT_EQ(three[i].prompt_tokens, one[i / 3].prompt_tokens);
    sessions.insert(three[i].session);
  }
  EXPECT_EQ(sessions.size(), 2u * 3);  // 2 sessions a copy
  // Copy r's block ids are disjoint from every other copy's (block 0 included), same structure.
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(three[static_cast<size_t>(r)].blocks, (std::vector<int64_t>{8 * r, 8 * r + 1}));
    EXPECT_EQ(three[3 + static_cast<size_t>(r)].session, three[static_cast<size_t>(r)].session);
  }
  EXPECT_DOUBLE_EQ(PrefixHitCeiling(three, 512).share(), PrefixHitCeiling(one, 512).share());
  EXPECT_EQ(BuildWorkload(trace, {.max_requests = 4, .replicas = 3}).size(), 4u);
}

// Staggered copies spread the rate over the window: each session moves whole (its turns keep their
// order and gaps), copy r by r/R of the span, wrapping around it; turns moved past the end are left out.
TEST(WorkloadTest, StaggeredReplicasMoveSessionsWholeAndSpreadTheRate) {
  // Session A: turns at 0 and 3 s (the second extends the first's two complete blocks); B at 1 s; a
  // last request at 4 s gives the span.
  const std::vector<TraceRequest> trace = {T(0, 1024, 4, {0, 1}), T(1000, 1024, 4, {0, 9}),
                                           T(3000, 2048, 4, {0, 1, 2, 3}), T(4000, 1024, 4, {0, 7})};
  const auto aligned = BuildWorkload(trace, {.replicas = 2});
  const auto staggered = BuildWorkload(trace, {.replicas = 2, .replica_stagger = true});
  ASSERT_EQ(staggered.size(), 7u);  // copy 1's A moves to 2 s: its turn at 5 s is past the 4 s window
  std::map<std::string, std::vector<double>> turns;
  for (size_t i = 0; i < staggered.size(); ++i) {
    EXPECT_EQ(staggered[i].index, static_cast<int64_t>(i));
    if (i > 0) {
      EXPECT_LE(staggered[i - 1].arrival_s, staggered[i].arrival_s);
    }
    turns[staggered[i].session].push_back(staggered[i].arrival_s);
  }
  // Copy 0 is the trace; copy 1's sessions start 2 s later, modulo 4 s; A keeps its 3 s gap.
  std::multiset<double> starts;
  for (const auto& [session, t] : turns) starts.insert(t.front());
  EXPECT_EQ(starts, (std::multiset<double>{0, 1, 4, 2, 3, 2}));
  size_t two_turn_sessions = 0;
  for (const auto& [session, t] : turns) {
    if (t.size() == 2) {
      EXPECT_DOUBLE_EQ(t[1] - t[0], 3.0);
      ++two_turn_sessions;
    }
  }
  EXPECT_EQ(two_turn_sessions, 1u);
  EXPECT_LE(staggered.back().arrival_s, 4.0);
  // Arrivals spread: aligned copies came in pairs at 4 instants.
  std::set<double> distinct_aligned, distinct_staggered;
  for (const auto& r : aligned) distinct_aligned.insert(r.arrival_s);
  for (const auto& r : staggered) distinct_staggered.insert(r.arrival_s);
  EXPECT_EQ(distinct_aligned.size(), 4u);
  EXPECT_GT(distinct_staggered.size(), 4u);
  // The cap applies after the copies are sorted by arrival.
  EXPECT_EQ(BuildWorkload(trace, {.max_requests = 3, .replicas = 2, .replica_stagger = true}).size(), 3u);
}

TEST(WorkloadTest, TokensFollowBlockIds) {
  WorkloadRequest a{.index = 0, .prompt_tokens = 150, .block_tokens = 64, .blocks = {0, 1, 2}};
  WorkloadRequest b{.index = 1, .prompt_tokens = 192, .block_tokens = 64, .blocks = {0, 1, 3}};
  WorkloadRequest c{.index = 2, .prompt_tokens = 100, .block_tokens = 64, .blocks = {1, 4}};
  const auto ta = WorkloadTokens(a, 16, 4096), tb = WorkloadTokens(b, 16, 4096), tc = WorkloadTokens(c, 16, 4096);
  ASSERT_EQ(ta.size(), 150u);
  ASSERT_EQ(tb.size(), 192u);
  ASSERT_EQ(tc.size(), 100u);
  for (int32_t t : ta) {
    EXPECT_GE(t, 16);
    EXPECT_LT(t, 4096);
  }
  EXPECT_TRUE(std::equal(ta.begin(), ta.begin() + 128, tb.begin()));  // blocks 0 and 1
  int same = 0;
  for (int i = 128; i < 150; ++i) same += ta[static_cast<size_t>(i)] == tb[static_cast<size_t>(i)];
  EXPECT_LT(same, 3);  // blocks 2 and 3 differ (a chance match of 1 in 4080 per token)
  // A block's tokens depend on its id alone, not on where it sits in the prompt.
  EXPECT_TRUE(std::equal(ta.begin() + 64, ta.begin() + 128, tc.begin()));
  same = 0;
  for (int i = 0; i < 36; ++i) same += ta[static_cast<size_t>(i)] == tc[64 + static_cast<size_t>(i)];
  EXPECT_LT(same, 3);
  EXPECT_EQ(WorkloadTokens(a, 16, 4096), ta);  // deterministic
  // A narrow range stays inside it.
  for (int32_t t : WorkloadTokens(b, 100, 103)) {
    EXPECT_GE(t, 100);
    EXPECT_LT(t, 103);
  }
  // Past the blocks (not from BuildWorkload): still prompt_tokens ids.
  WorkloadRequest d{.index = 9, .prompt_tokens = 70, .block_tokens = 64, .blocks = {5}};
  EXPECT_EQ(WorkloadTokens(d, 16, 4096).size(), 70u);
}

// The ceiling worked by hand: blocks of 4 tokens.
TEST(WorkloadTest, HitCeilingByHand) {
  auto R = [](int64_t prompt, std::vector<int64_t> blocks) {
    return WorkloadRequest{.prompt_tokens = prompt, .block_tokens = 4, .blocks = std::move(blocks)};
  };
  const std::vector<WorkloadRequest> w = {
      R(10, {1, 2, 3}),  // nothing seen: 0. Block 3 seen with 2 tokens.
      R(12, {1, 2, 4}),  // 4 + 4, then block 4 unseen: 8 (cap: 10 at unit 2, 8 at unit 4)
      R(12, {1, 2, 3}),  // 4 + 4 + 2 (block 3 seen with 2 of its tokens): 10 (cap 10 | 8)
      R(8, {1, 2}),      // 4 + 4 = 8, capped at prompt - 1 = 7: 6 at unit 2, 4 at unit 4
      R(3, {5}),         // 0
  };
  const HitCeiling u2 = PrefixHitCeiling(w, 2);
  EXPECT_EQ(u2.prompt_tokens, 45);
  EXPECT_EQ(u2.hit_tokens, 0 + 8 + 10 + 6 + 0);
  EXPECT_DOUBLE_EQ(u2.share(), 24.0 / 45);
  const HitCeiling u4 = PrefixHitCeiling(w, 4);
  EXPECT_EQ(u4.hit_tokens, 0 + 8 + 8 + 4 + 0);
  EXPECT_EQ(PrefixHitCeiling({}, 4).share(), 0);
}

TEST(WorkloadTest, CausalCeilingCountsOnlyPrefixesReadyBeforeArrival) {
  // Three turns of one conversation, 64-token blocks (1/8 of 512), one unit per block.
  const std::vector<TraceRequest> trace = {
      T(0, 1024, 1, {0, 1}),         // 128 tokens
      T(1000, 2048, 1, {0, 1, 2, 3}),  // hits 2 blocks of turn 1
      T(2000, 3072, 1, {0, 1, 2, 3, 4, 5}),  // hits 4 blocks of turn 2
  };
  WorkloadOptions o;
  o.token_scale = 0.125;
  const auto w = BuildWorkload(trace, o);
  const int64_t unbounded = PrefixHitCeiling(w, 64).hit_tokens;
  EXPECT_EQ(unbounded, 128 + 256);
  const double inf = std::numeric_limits<double>::infinity();
  // Every turn ready at once: the same as the unbounded ceiling.
  EXPECT_EQ(CausalHitCeiling(w, {0, 1, 2}, 64).hit_tokens, unbounded);
  // Turn 2 still in prefill when turn 3 arrives: turn 3 hits only turn 1's two blocks.
  EXPECT_EQ(CausalHitCeiling(w, {0.5, 2.5, 3}, 64).hit_tokens, 128 + 128);
  // Turn 1 never ready: turn 2 hits nothing, turn 3 hits turn 2's four blocks.
  EXPECT_EQ(CausalHitCeiling(w, {inf, 1.5, 3}, 64).hit_tokens, 0 + 256);
}

}  // namespace
}  // namespace ds41
