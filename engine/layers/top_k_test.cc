// TopKByScore against the plain definition: sort by (score descending, index ascending), skipping
// -inf and NaN, keep k, return them in index order.
#include "engine/layers/top_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/kernels/numerics.h"

namespace ds41 {
namespace {

std::vector<int32_t> ByDefinition(const std::vector<float>& score, int k) {
  std::vector<int32_t> idx;
  for (size_t j = 0; j < score.size(); ++j)
    if (score[j] > -INFINITY) idx.push_back(static_cast<int32_t>(j));
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return score[a] > score[b]; });
  if (static_cast<int>(idx.size()) > k) idx.resize(static_cast<size_t>(std::max(k, 0)));
  std::sort(idx.begin(), idx.end());
  return idx;
}

TEST(TopKTest, MatchesTheDefinitionWithTiesSignedZerosInfinitiesAndNan) {
  std::mt19937 rng(7);
  for (int round = 0; round < 400; ++round) {
    const int n = static_cast<int>(rng() % 3000);
    std::vector<float> s(n);
    const int spread = 1 + static_cast<int>(rng() % 6);  // few distinct values: many ties
    for (auto& v : s) {
      const uint32_t r = rng() % 100;
      if (r < 3) v = -INFINITY;
      else if (r < 5) v = std::nanf("");
      else if (r < 6) v = INFINITY;
      else if (r < 12) v = (rng() % 2) ? 0.0f : -0.0f;
      else if (r < 40) v = static_cast<float>(static_cast<int>(rng() % spread) - spread / 2);
      else v = RoundBf16(std::ldexp(std::normal_distribution<float>(0.0f, 1.0f)(rng), static_cast<int>(rng() % 60) - 30));
    }
    for (int k : {0, 1, 7, 64, n / 3, n, n + 5}) {
      EXPECT_EQ(TopKByScore(s, k), ByDefinition(s, k)) << "n " << n << " k " << k << " round " << round;
    }
  }
}

TEST(TopKTest, FullFloatsNotOnlyBf16) {
  std::mt19937 rng(8);
  std::vector<float> s(5000);
  for (auto& v : s) v = std::normal_distribution<float>(0.0f, 1.0f)(rng);
  s[10] = s[20] = s[4000];  // ties between full-precision values
  for (int k : {1, 100, 2500, 4999}) EXPECT_EQ(TopKByScore(s, k), ByDefinition(s, k)) << k;
}

}  // namespace
}  // namespace ds41
