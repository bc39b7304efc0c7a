// Token timing from chunk batches: TTFT from the scheduled arrival, gaps spread over a batch's tokens.
#include "trace/token_timing.h"

#include <gtest/gtest.h>

namespace ds41 {
namespace {

TEST(TokenTimingTest, OneChunkATokenGivesTheGaps) {
  RequestRecord r;
  TimeTokens({{1.5, 1}, {1.6, 1}, {1.8, 1}}, 3, 1.0, &r);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.1, 1e-12);
  EXPECT_NEAR(r.itl_s[1], 0.2, 1e-12);
}

TEST(TokenTimingTest, ABatchSpreadsItsGapOverItsTokens) {
  RequestRecord r;
  // 2 chunks in the first read (a gap of 0), then 4 in one read 0.4 s later.
  TimeTokens({{2.0, 2}, {2.4, 4}}, 6, 0.0, &r);
  EXPECT_DOUBLE_EQ(r.ttft_s, 2.0);
  ASSERT_EQ(r.itl_s.size(), 5u);
  EXPECT_EQ(r.itl_s[0], 0);
  for (size_t i = 1; i < 5; ++i) EXPECT_NEAR(r.itl_s[i], 0.1, 1e-12);
}

TEST(TokenTimingTest, HiddenTokensGoToTheLaterBatches) {
  RequestRecord r;
  // 3 chunks show 3 of 6 tokens: 3 hidden, spread over the 2 later batches (2 and 1).
  TimeTokens({{1.0, 1}, {1.3, 1}, {1.5, 1}}, 6, 0.5, &r);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
  ASSERT_EQ(r.itl_s.size(), 5u);  // one gap per token after the first
  EXPECT_NEAR(r.itl_s[0], 0.1, 1e-12);  // 0.3 s over 3 tokens
  EXPECT_NEAR(r.itl_s[2], 0.1, 1e-12);
  EXPECT_NEAR(r.itl_s[3], 0.1, 1e-12);  // 0.2 s over 2 tokens
  // All tokens in one batch: gaps of 0.
  TimeTokens({{3.0, 0}}, 4, 1.0, &r);
  EXPECT_DOUBLE_EQ(r.ttft_s, 2.0);
  EXPECT_EQ(r.itl_s, (std::vector<double>{0, 0, 0}));
  RequestRecord none;
  TimeTokens({}, 5, 0, &none);
  EXPECT_EQ(none.ttft_s, -1);
  EXPECT_TRUE(none.itl_s.empty());
}

}  // namespace
}  // namespace ds41
