#include <gtest/gtest.h>

#include <cmath>

#include "engine/layers/forward.h"

namespace ds41 {
namespace {

TEST(SinkhornTest, CombIsDoublyStochasticAndBounded) {
  const int hc = 4;
  float m[24], base[24], scale[3] = {0.7f, -1.3f, 2.1f};
  for (int i = 0; i < 24; ++i) {
    m[i] = std::sin(1.7f * i) * 2.0f;
    base[i] = std::cos(0.3f * i);
  }
  float pre[4], post[4], comb[16];
  SplitSinkhorn(m, scale, base, hc, 20, 1e-6f, pre, post, comb);
  for (int i = 0; i < hc; ++i) {
    EXPECT_GT(pre[i], 0.0f);
    EXPECT_LT(pre[i], 1.0f + 1e-5f);
    EXPECT_GT(post[i], 0.0f);
    EXPECT_LT(post[i], 2.0f);
    float row = 0, col = 0;
    for (int j = 0; j < hc; ++j) {
      row += comb[i * hc + j];
      col += comb[j * hc + i];
      EXPECT_GE(comb[i * hc + j], 0.0f);
    }
    EXPECT_NEAR(col, 1.0f, 1e-5f);  // ends on a column normalization
    EXPECT_NEAR(row, 1.0f, 1e-3f);
  }
}

TEST(SinkhornTest, OneIterationIsSoftmaxThenColumnNormalization) {
  const int hc = 2;
  float m[8] = {0, 0, 0, 0, 1, 2, 3, 4}, base[8] = {}, scale[3] = {1, 1, 1};
  float pre[2], post[2], comb[4];
  SplitSinkhorn(m, scale, base, hc, 1, 0.0f, pre, post, comb);
  const double a = std::exp(1.0) / (std::exp(1.0) + std::exp(2.0)), b = 1 - a;
  const double c = std::exp(3.0) / (std::exp(3.0) + std::exp(4.0)), d = 1 - c;
  EXPECT_NEAR(comb[0], a / (a + c), 1e-6);
  EXPECT_NEAR(comb[1], b / (b + d), 1e-6);
  EXPECT_FLOAT_EQ(pre[0], 0.5f);
  EXPECT_FLOAT_EQ(post[1], 1.0f);
}

}  // namespace
}  // namespace ds41
