#include "engine/kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/kernels/numerics.h"
#include "engine/config/presets.h"

namespace ds41 {
namespace {

TEST(RopeTest, YarnTableOfTheRelease) {
  ModelConfig c = ReleaseConfig();
  RopeTable plain(c, false), yarn(c, true);
  ASSERT_EQ(yarn.pairs(), 32);
  // Ratio-0 layers: theta 10000, no YaRN.
  for (int k = 0; k < 32; ++k) {
    const float expect = 1.0f / static_cast<float>(std::pow(10000.0, static_cast<double>(static_cast<float>(2 * k) / 64.0f)));
    EXPECT_EQ(plain.freqs()[k], expect) << k;
  }
  // Compressed layers: base 160000, low 15 / high 25: k <= 15 unchanged, k >= 25 divided by 16.
  for (int k = 0; k < 32; ++k) {
    const float base = 1.0f / static_cast<float>(std::pow(160000.0, static_cast<double>(static_cast<float>(2 * k) / 64.0f)));
    if (k <= 15) {
      EXPECT_EQ(yarn.freqs()[k], base) << k;
    } else if (k >= 25) {
      EXPECT_FLOAT_EQ(yarn.freqs()[k], base / 16.0f) << k;
    } else {
      const float ramp = (k - 15) / 10.0f;
      EXPECT_NEAR(yarn.freqs()[k], base * (1 - ramp) + base / 16 * ramp, base * 1e-6) << k;
    }
  }
}

TEST(RopeTest, RotationAndInverse) {
  ModelConfig c = TinyConfig();
  RopeTable t(c, true);
  std::vector<float> cs(32), sn(32);
  t.Angles(7, cs.data(), sn.data());
  EXPECT_EQ(cs[0], static_cast<float>(std::cos(7.0)));
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = RoundBf16(0.1f * (i - 30));
  std::vector<float> y = x;
  ApplyRope(y.data(), 32, cs.data(), sn.data(), false);
  // Norm of each pair is preserved up to bf16 rounding; the inverse brings x back within rounding.
  for (int k = 0; k < 32; ++k) {
    EXPECT_NEAR(std::hypot(y[2 * k], y[2 * k + 1]), std::hypot(x[2 * k], x[2 * k + 1]), 0.02);
  }
  ApplyRope(y.data(), 32, cs.data(), sn.data(), true);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i], 0.02) << i;
  // Position 0 is the identity.
  t.Angles(0, cs.data(), sn.data());
  y = x;
  ApplyRope(y.data(), 32, cs.data(), sn.data(), false);
  EXPECT_EQ(y, x);
}

}  // namespace
}  // namespace ds41
