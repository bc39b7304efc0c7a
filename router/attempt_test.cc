// DecideAttempt (router/attempt.h), the decision RouterCore::PlaceAttempt and the simulator share:
// each refusal at its edge, the SWA fallback of a migration, and what a refusal leaves uncounted.
#include "router/attempt.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ds41 {
namespace {

NodeLoad Node(const std::string& a, int64_t running = 0, int64_t queued = 0) {
  NodeLoad n;
  n.address = a;
  n.running = running;
  n.queued_tokens = queued;
  return n;
}

PlacerOptions Cost() {
  PlacerOptions o;
  o.policy = PlacementPolicy::kCost;
  return o;
}

AttemptInput Prompt(int64_t tokens) {
  AttemptInput in;
  in.prompt_tokens = tokens;
  return in;
}

TEST(AttemptTest, ADecoderlessPlacementIsDecodersFull) {
  Placer placer(Cost());
  const int limit = placer.cost().max_batch;
  const AttemptDecision d = DecideAttempt(Prompt(100), {Node("d0", limit)}, {Node("e0")}, &placer);
  EXPECT_EQ(d.refusal, AttemptRefusal::kDecodersFull);
  EXPECT_STREQ(AttemptRefusalName(d.refusal), "decoders_full");
  EXPECT_EQ(d.message, "every decoder is at its running limit");
}

// Refused exactly when the predicted first token falls after the deadline.
TEST(AttemptTest, APredictionPastTheDeadlineIsRefusedAndOneWithinIsNot) {
  Placer placer(Cost());
  const std::vector<NodeLoad> dec = {Node("d0")}, enc = {Node("e0")};
  const double predicted = DecideAttempt(Prompt(40000), dec, enc, &placer).placement.predicted_seconds;
  ASSERT_GT(predicted, 1.0);  // 40,000 tokens at the default 4,000 a second
  AttemptInput late = Prompt(40000);
  late.seconds_left = predicted * 0.99;
  const AttemptDecision refused = DecideAttempt(late, dec, enc, &placer);
  EXPECT_EQ(refused.refusal, AttemptRefusal::kDeadline);
  EXPECT_NE(refused.message.find("is past the"), std::string::npos) << refused.message;
  AttemptInput in_time = Prompt(40000);
  in_time.seconds_left = predicted * 1.01;
  EXPECT_EQ(DecideAttempt(in_time, dec, enc, &placer).refusal, AttemptRefusal::kNone);
}

// Queue shedding judges the wait behind queued work, scaled by what requests saw, for new requests
// only; the hint is the excess, in whole seconds from 1 to 60.
TEST(AttemptTest, AWaitOverTheLimitIsShedForNewRequestsOnlyWithItsExcessAsTheHint) {
  Placer placer(Cost());
  const std::vector<NodeLoad> dec = {Node("d0")}, enc = {Node("e0", 1, 20000)};  // 5 s of queued work
  AttemptInput in = Prompt(100);
  in.max_queue_seconds = 2;
  const AttemptDecision shed = DecideAttempt(in, dec, enc, &placer);
  ASSERT_EQ(shed.refusal, AttemptRefusal::kQueue);
  EXPECT_GT(shed.queue_wait_s, 2);
  EXPECT_EQ(shed.retry_after_s, static_cast<int>(std::ceil(shed.queue_wait_s - 2)));
  EXPECT_NE(shed.message.find("overloaded"), std::string::npos);
  in.first_attempt = false;  // a retry or a migration was admitted already
  EXPECT_EQ(DecideAttempt(in, dec, enc, &placer).refusal, AttemptRefusal::kNone);
  in.first_attempt = true;
  in.max_queue_seconds = 0;  // off
  EXPECT_EQ(DecideAttempt(in, dec, enc, &placer).refusal, AttemptRefusal::kNone);
  // A wait under the limit passes until the observed scale makes it real.
  in.max_queue_seconds = shed.queue_wait_s * 1.5;
  EXPECT_EQ(DecideAttempt(in, dec, enc, &placer).refusal, AttemptRefusal::kNone);
  PredictionScale doubled;  // first tokens have taken twice as long as predicted
  for (int i = 0; i < 8; ++i) doubled.Add(1, 2);
  in.prediction_scale = &doubled;
  const AttemptDecision scaled = DecideAttempt(in, dec, enc, &placer);
  EXPECT_EQ(scaled.refusal, AttemptRefusal::kQueue);
  EXPECT_DOUBLE_EQ(scaled.queue_wait_s, 2 * shed.queue_wait_s);
  PredictionScale far(64, 8, 1000);
  for (int i = 0; i < 8; ++i) far.Add(1, 1000);
  in.prediction_scale = &far;
  EXPECT_EQ(DecideAttempt(in, dec, enc, &placer).retry_after_s, 60);
}

// The session's holder is the SWA peer; when it is excluded (it failed this request) a migration
// names the first attempt's encoder instead, and only with a cached prefix to restore.
TEST(AttemptTest, AnExcludedHolderGivesWayToTheFallback) {
  Placer placer(Cost());
  const std::vector<NodeLoad> dec = {Node("d0"), Node("d1")}, enc = {Node("e0")};
  AttemptInput in = Prompt(1000);
  in.cached_tokens = 512;
  in.bound = "d1";
  EXPECT_EQ(DecideAttempt(in, dec, enc, &placer).swa_peer, "d1");
  const std::set<std::string> failed = {"d1"};
  in.excluded = &failed;
  EXPECT_EQ(DecideAttempt(in, dec, enc, &placer).swa_peer, "d1");  // no fallback given: as it was
  in.swa_fallback = "e0";
  const AttemptDecision d = DecideAttempt(in, dec, enc, &placer);
  EXPECT_EQ(d.swa_peer, "e0");
  EXPECT_FALSE(d.placement.decoder.empty());  // placed with the SWA state available
  in.cached_tokens = 0;
  in.bound.clear();
  EXPECT_EQ(DecideAttempt(in, dec, enc, &placer).swa_peer, "");
}

}  // namespace
}  // namespace ds41
