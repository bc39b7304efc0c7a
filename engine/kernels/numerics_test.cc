#include "engine/kernels/numerics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ds41 {
namespace {

TEST(Bf16Test, RoundTripAndTiesToEven) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bf16ToF32(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(F32ToBf16(f), b);
  }
  EXPECT_EQ(RoundBf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);                                  // tie -> even
  EXPECT_EQ(RoundBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));       // tie -> even
  EXPECT_EQ(RoundBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_TRUE(std::isnan(RoundBf16(std::nanf(""))));
}

TEST(E4m3Test, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const float v = E4m3ToF32(static_cast<uint8_t>(c));
    if (std::isnan(v)) {
      EXPECT_TRUE((c & 0x7F) == 0x7F);
      continue;
    }
    EXPECT_EQ(F32ToE4m3(v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(E4m3ToF32(0x7E), 448.0f);
  EXPECT_EQ(E4m3ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(E4m3ToF32(0x08), std::ldexp(1.0f, -6));
}

TEST(E4m3Test, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(E4m3ToF32(F32ToE4m3(1.0625f)), 1.0f);     // halfway 1 / 1.125 -> even mantissa
  EXPECT_EQ(E4m3ToF32(F32ToE4m3(1.1875f)), 1.25f);    // halfway 1.125 / 1.25 -> even
  EXPECT_EQ(E4m3ToF32(F32ToE4m3(1.07f)), 1.125f);
  EXPECT_EQ(E4m3ToF32(F32ToE4m3(std::ldexp(1.0f, -10))), 0.0f);                      // subnormal tie
  EXPECT_EQ(E4m3ToF32(F32ToE4m3(3 * std::ldexp(1.0f, -10))), std::ldexp(1.0f, -8));  // tie -> even
  EXPECT_EQ(E4m3ToF32(F32ToE4m3(std::ldexp(15.5f, -10))), std::ldexp(1.0f, -6));    // up into normals
  EXPECT_EQ(E4m3ToF32(F32ToE4m3(500.0f)), 448.0f);
  EXPECT_EQ(E4m3ToF32(F32ToE4m3(-1e9f)), -448.0f);
  EXPECT_EQ(F32ToE4m3(-0.0f), 0x80);
  EXPECT_EQ(F32ToE4m3(std::nanf("")), 0x7F);
}

TEST(E2m1Test, CodesAndTies) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(F32ToE2m1(E2m1ToF32(static_cast<uint8_t>(c))), c);
  const float ties[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float want[7] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(E2m1ToF32(F32ToE2m1(ties[i])), want[i]) << ties[i];
    EXPECT_EQ(E2m1ToF32(F32ToE2m1(-ties[i])), -want[i]) << -ties[i];
  }
  EXPECT_EQ(F32ToE2m1(-0.1f), 8);  // the sign survives rounding to zero
  EXPECT_EQ(E2m1ToF32(F32ToE2m1(5.9f)), 6.0f);
}

TEST(E8m0Test, PowersOfTwo) {
  EXPECT_EQ(E8m0ToF32(127), 1.0f);
  EXPECT_EQ(E8m0ToF32(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(E8m0ToF32(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(E8m0ToF32(255)));
  for (int e = 1; e < 255; ++e) EXPECT_EQ(E8m0FromPow2(E8m0ToF32(static_cast<uint8_t>(e))), e);
}

TEST(ScaleTest, FastRoundScaleIsCeilPow2) {
  EXPECT_EQ(FastRoundScale(1.0f, 1.0f), 1.0f);
  EXPECT_EQ(FastRoundScale(1.5f, 1.0f), 2.0f);
  EXPECT_EQ(FastRoundScale(0.75f, 1.0f), 1.0f);
  EXPECT_EQ(FastRoundScale(0.5f, 1.0f), 0.5f);
}

TEST(QuantTest, Qdq8CodesReconstructWithinHalfStep) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = std::sin(0.7f * i) * 3.0f;
  uint8_t codes[32];
  Qdq8Group g = QuantizeQdq8(x, 32, codes);
  EXPECT_EQ(E8m0ToF32(g.scale_e8m0), g.scale);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_LE(amax / g.scale, 448.0f);
  EXPECT_GT(amax / g.scale, 224.0f);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(E4m3ToF32(codes[i]) * g.scale, x[i], std::fabs(x[i]) / 16 + 1e-6);
}

TEST(QuantTest, Qdq4ScalesFollowTheirFormats) {
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = 0.01f * (i - 13);
  uint8_t codes[32];
  Qdq8Group g = QuantizeQdq4e8(x, 32, codes);
  EXPECT_EQ(g.scale, FastRoundScale(0.18f, static_cast<float>(1.0 / 6.0)));
  Qdq4e4Group h = QuantizeQdq4e4(x, 16, codes);
  EXPECT_EQ(h.scale, E4m3ToF32(F32ToE4m3(0.13f / 6.0f)));
  // An all-zero group keeps a non-zero scale (the reference's floors).
  float z[16] = {};
  EXPECT_EQ(QuantizeQdq4e4(z, 16, codes).scale, E4m3ToF32(F32ToE4m3(std::ldexp(1.0f, -9))));
}

TEST(TranscendentalTest, DoubleEvaluatedOnce) {
  EXPECT_EQ(ExpF(0.0f), 1.0f);
  EXPECT_EQ(SigmoidF(0.0f), 0.5f);
  EXPECT_EQ(SoftplusF(30.0f), 30.0f);
  EXPECT_EQ(RsqrtF(4.0f), 0.5f);
  EXPECT_EQ(ExpF(1.0f), static_cast<float>(std::exp(1.0)));
}

}  // namespace
}  // namespace ds41
