#include "engine/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace ds41 {
namespace {

TEST(SamplingTest, GreedyIsArgmaxWithLowestIdOnTies) {
  std::vector<float> l = {0.1f, 3.0f, 3.0f, -1.0f};
  Rng rng(1);
  EXPECT_EQ(SampleToken(l.data(), 4, {}, &rng), 1);
}

TEST(SamplingTest, SeededSamplingIsDeterministicAndFollowsTheDistribution) {
  std::vector<float> l = {0.0f, std::log(3.0f), -50.0f};
  SamplingParams p{1.0f, 1.0f, 42};
  auto draw = [&](uint64_t seed) {
    Rng rng(seed);
    std::vector<int> out;
    for (int i = 0; i < 4000; ++i) out.push_back(SampleToken(l.data(), 3, p, &rng));
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
  std::map<int, int> n;
  for (int t : draw(7)) ++n[t];
  EXPECT_NEAR(n[1] / 4000.0, 0.75, 0.03);
  EXPECT_EQ(n[2], 0);
}

TEST(SamplingTest, TopPKeepsTheNucleus) {
  std::vector<float> l = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  SamplingParams p{1.0f, 0.5f, 0};
  Rng rng(3);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(SampleToken(l.data(), 3, p, &rng), 0);
  p.top_p = 0.85f;
  for (int i = 0; i < 500; ++i) EXPECT_NE(SampleToken(l.data(), 3, p, &rng), 2);
}

TEST(SamplingTest, ParamsAreValidated) {
  EXPECT_FALSE((SamplingParams{-1.0f, 1.0f, 0}).Validate().ok());
  EXPECT_FALSE((SamplingParams{1.0f, 0.0f, 0}).Validate().ok());
  EXPECT_FALSE((SamplingParams{1.0f, 1.5f, 0}).Validate().ok());
  EXPECT_FALSE((SamplingParams{NAN, 1.0f, 0}).Validate().ok());
  EXPECT_TRUE((SamplingParams{0.7f, 0.9f, 5}).Validate().ok());
}

}  // namespace
}  // namespace ds41
