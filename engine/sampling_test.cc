#include "engine/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

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

TEST(SamplingTest, TokenProbabilitiesAreWhatSampleTokenDraws) {
  std::vector<float> l = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  std::vector<double> p = TokenProbabilities(l.data(), 3, {1.0f, 0.85f, 0});
  EXPECT_NEAR(p[0], 2.0 / 3, 1e-6);
  EXPECT_NEAR(p[1], 1.0 / 3, 1e-6);
  EXPECT_EQ(p[2], 0.0);
  EXPECT_EQ(TokenProbabilities(l.data(), 3, {}), (std::vector<double>{1.0, 0.0, 0.0}));
}

// Draft tokens from q, kept or replaced by AcceptDraft: the tokens must follow p, not q (chi-square
// over the 6 ids, 5 degrees of freedom: 20.5 is the 0.999 quantile), and the acceptance rate must be
// sum_i min(p_i, q_i). Includes an id q never proposes and one p never emits.
TEST(SamplingTest, SpeculativeAcceptanceKeepsTheTargetDistribution) {
  const std::vector<double> p = {0.30, 0.25, 0.20, 0.15, 0.10, 0.00};
  const std::vector<double> q = {0.10, 0.40, 0.20, 0.00, 0.05, 0.25};
  std::vector<float> q_logits(q.size());
  for (size_t i = 0; i < q.size(); ++i) q_logits[i] = q[i] > 0 ? std::log(static_cast<float>(q[i])) : -1e30f;
  const SamplingParams draft{1.0f, 1.0f, 0};
  Rng rng(2024);
  const int kTrials = 200000;
  std::vector<int> count(p.size());
  int accepted = 0;
  for (int t = 0; t < kTrials; ++t) {
    const int32_t x = SampleToken(q_logits.data(), static_cast<int>(q.size()), draft, &rng);
    const DraftVerdict v = AcceptDraft(p, q, x, &rng);
    accepted += v.accepted;
    ++count[v.token];
  }
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(count[i], 0) << "id " << i;
      continue;
    }
    const double want = kTrials * p[i];
    chi2 += (count[i] - want) * (count[i] - want) / want;
  }
  EXPECT_LT(chi2, 20.5);
  double overlap = 0;
  for (size_t i = 0; i < p.size(); ++i) overlap += std::min(p[i], q[i]);
  EXPECT_NEAR(static_cast<double>(accepted) / kTrials, overlap, 0.005);
}

TEST(SamplingTest, GreedyAcceptanceKeepsTheArgmaxOnly) {
  const std::vector<double> p = {0, 0, 1, 0}, q = {0, 1, 0, 0}, q_same = {0, 0, 1, 0};
  Rng rng(1);
  const DraftVerdict no = AcceptDraft(p, q, 1, &rng);
  EXPECT_FALSE(no.accepted);
  EXPECT_EQ(no.token, 2);
  const DraftVerdict yes = AcceptDraft(p, q_same, 2, &rng);
  EXPECT_TRUE(yes.accepted);
  EXPECT_EQ(yes.token, 2);
}

}  // namespace
}  // namespace ds41

namespace ds41 {
namespace {

// OpenAI's definition written out the plain way: count each id among the tokens generated so far.
std::vector<float> ReferenceAdjusted(std::vector<float> logits, const LogitAdjustments& a,
                                     const std::vector<int32_t>& generated) {
  for (const auto& [id, b] : a.bias) logits[id] += b;
  for (size_t j = 0; j < logits.size(); ++j) {
    const auto c = static_cast<float>(std::count(generated.begin(), generated.end(), static_cast<int32_t>(j)));
    logits[j] -= c * a.frequency_penalty + (c > 0 ? a.presence_penalty : 0.0f);
  }
  return logits;
}

TEST(LogitProcessorTest, MatchesOpenAisDefinitionAfterEveryToken) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> logit(-5.0f, 5.0f), penalty(-2.0f, 2.0f), bias(-100.0f, 100.0f);
  std::uniform_int_distribution<int32_t> id(0, 49);
  for (int trial = 0; trial < 50; ++trial) {
    LogitAdjustments a;
    a.frequency_penalty = trial % 3 == 0 ? 0.0f : penalty(gen);
    a.presence_penalty = trial % 5 == 0 ? 0.0f : penalty(gen);
    for (int32_t j = 0; j < 50; j += 7 + trial % 5) a.bias.emplace_back(j, bias(gen));
    ASSERT_TRUE(a.Validate(50).ok());
    LogitProcessor p(a);
    std::vector<int32_t> generated;
    for (int step = 0; step < 40; ++step) {
      std::vector<float> l(50);
      for (float& x : l) x = logit(gen);
      const std::vector<float> want = ReferenceAdjusted(l, a, generated);
      p.Apply(l.data(), 50);
      for (int j = 0; j < 50; ++j) ASSERT_NEAR(l[j], want[j], 1e-4f) << "trial " << trial << " step " << step << " id " << j;
      // Few distinct ids, so counts above one happen.
      const int32_t t = id(gen) % 12;
      generated.push_back(t);
      p.Count(t);
    }
  }
}

TEST(LogitProcessorTest, NoAdjustmentsLeaveLogitsAlone) {
  LogitProcessor p;
  EXPECT_FALSE(p.active());
  std::vector<float> l = {1.0f, -2.0f, 3.5f};
  p.Count(2);
  p.Apply(l.data(), 3);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -2.0f, 3.5f}));
}

TEST(LogitProcessorTest, ANegativeHundredBiasBansAToken) {
  LogitAdjustments a;
  a.bias = {{1, -100.0f}};
  LogitProcessor p(a);
  Rng rng(5);
  for (int i = 0; i < 500; ++i) {
    std::vector<float> l = {0.0f, 20.0f, 0.5f};
    p.Apply(l.data(), 3);
    EXPECT_NE(SampleToken(l.data(), 3, {1.0f, 1.0f, 0}, &rng), 1);
  }
}

TEST(LogitProcessorTest, ValidateRefusesWhatOpenAiRefuses) {
  EXPECT_TRUE((LogitAdjustments{2.0f, -2.0f, {{0, 100.0f}, {9, -100.0f}}}).Validate(10).ok());
  EXPECT_FALSE((LogitAdjustments{2.5f, 0.0f, {}}).Validate(10).ok());
  EXPECT_FALSE((LogitAdjustments{0.0f, -2.1f, {}}).Validate(10).ok());
  EXPECT_FALSE((LogitAdjustments{std::nanf(""), 0.0f, {}}).Validate(10).ok());
  EXPECT_FALSE((LogitAdjustments{0.0f, 0.0f, {{10, 1.0f}}}).Validate(10).ok());
  EXPECT_FALSE((LogitAdjustments{0.0f, 0.0f, {{-1, 1.0f}}}).Validate(10).ok());
  EXPECT_FALSE((LogitAdjustments{0.0f, 0.0f, {{3, 100.5f}}}).Validate(10).ok());
  EXPECT_FALSE((LogitAdjustments{0.0f, 0.0f, {{3, 1.0f}, {3, 2.0f}}}).Validate(10).ok());
}

TEST(LogprobsTest, LogSoftmaxWithTheTopIdsInOrder) {
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, -2.0f, 0.5f};
  double z = 0;
  for (float x : l) z += std::exp(static_cast<double>(x));
  const TokenLogprob lp = LogprobsOf(l.data(), 5, 4, 3);
  EXPECT_NEAR(lp.logprob, 0.5 - std::log(z), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // ties to the lower id
  EXPECT_EQ(lp.top[1].first, 2);
  EXPECT_EQ(lp.top[2].first, 0);
  EXPECT_NEAR(lp.top[2].second, 1.0 - std::log(z), 1e-6);
  EXPECT_TRUE(LogprobsOf(l.data(), 5, 0, 0).top.empty());
  EXPECT_EQ(LogprobsOf(l.data(), 5, 0, 20).top.size(), 5u);  // no more than the vocabulary
  // Large logits stay finite (log-sum-exp around the maximum).
  const std::vector<float> big = {1000.0f, 999.0f};
  EXPECT_NEAR(LogprobsOf(big.data(), 2, 1, 0).logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-5);
}

}  // namespace
}  // namespace ds41
