// Attention's vector kernels give the canonical bits (docs/numerics.md) on every SIMD target.
#include "engine/vector_ops.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/numerics.h"

namespace ds41 {
namespace {

std::vector<float> Bf16Values(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = RoundBf16(d(rng));
  return v;
}

// Heads that fill 4, 3, 2, 1 vectors and a lane remainder; odd key counts; hd of one and many blocks.
struct Shape {
  int H, hd, nkeys;
};

class VectorOpsTargetsTest : public ::testing::TestWithParam<Shape> {};

TEST_P(VectorOpsTargetsTest, HeadScoresAndBlockPvMatchTheCanonicalLoops) {
  const Shape c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.H * 1000 + c.hd + c.nkeys));
  const std::vector<float> qT = Bf16Values(rng, static_cast<size_t>(c.hd) * c.H);
  const std::vector<float> keys = Bf16Values(rng, static_cast<size_t>(c.nkeys) * c.hd);
  std::vector<double> p(static_cast<size_t>(c.H) * c.nkeys);
  for (auto& v : p) v = RoundBf16(std::uniform_real_distribution<float>(0.0f, 1.0f)(rng));

  std::vector<float> want_s(static_cast<size_t>(c.nkeys) * c.H);
  for (int k = 0; k < c.nkeys; ++k)
    for (int h = 0; h < c.H; ++h) {
      float acc = 0.0f;
      for (int b = 0; b < c.hd; b += 32) {
        float part = qT[b * c.H + h] * keys[k * c.hd + b];
        for (int d = b + 1; d < b + 32; ++d) part += qT[d * c.H + h] * keys[k * c.hd + d];
        acc = b == 0 ? part : acc + part;
      }
      want_s[k * c.H + h] = acc;
    }
  std::vector<double> want_pv(static_cast<size_t>(c.H) * c.hd);
  for (int h = 0; h < c.H; ++h)
    for (int d = 0; d < c.hd; ++d) {
      double s = 0.0;
      for (int k = 0; k < c.nkeys; ++k) s += p[h * c.nkeys + k] * static_cast<double>(keys[k * c.hd + d]);
      want_pv[h * c.hd + d] = s;
    }

  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> s(want_s.size());
    std::vector<double> pv(want_pv.size());
    HeadScores(qT.data(), c.H, c.hd, keys.data(), c.nkeys, s.data());
    BlockPv(p.data(), c.H, c.nkeys, keys.data(), c.hd, pv.data());
    const std::string where = hwy::TargetName(target);
    EXPECT_EQ(0, std::memcmp(s.data(), want_s.data(), s.size() * 4)) << "scores " << where;
    EXPECT_EQ(0, std::memcmp(pv.data(), want_pv.data(), pv.size() * 8)) << "pv " << where;
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Blocks of random bit patterns (every exponent, subnormals, NaN and infinities), of normal values
// at every scale, of exact rounding ties on both grids, of signed zeros.
TEST(VectorOpsTest, QuantizeQdq8BlocksMatchesTheScalarQuantizerOnEveryTarget) {
  std::mt19937 rng(11);
  std::vector<float> x;
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  for (int b = 0; b < 2000; ++b)
    for (int k = 0; k < 32; ++k) x.push_back(bits(static_cast<uint32_t>(rng())));
  for (int e = -140; e <= 120; ++e)
    for (int k = 0; k < 32; ++k) x.push_back(std::ldexp(std::normal_distribution<float>(0.0f, 1.0f)(rng), e));
  for (int b = 0; b < 64; ++b) {  // amax 448 (scale 1): ties at (m + 1/2) * 2^-9 and on the 3-bit mantissa grid
    x.push_back(448.0f);
    for (int k = 1; k < 32; ++k)
      x.push_back(k % 2 ? (static_cast<float>(rng() % 16) + 0.5f) / 512.0f
                        : std::ldexp(1.0f + (static_cast<float>(rng() % 8) + 0.5f) / 8.0f, static_cast<int>(rng() % 14) - 6) *
                              (rng() % 2 ? 1.0f : -1.0f));
  }
  for (int k = 0; k < 32; ++k) x.push_back(k % 2 ? -0.0f : 0.0f);
  const int64_t blocks = static_cast<int64_t>(x.size()) / 32;
  std::vector<float> want(x.size()), want_s(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t codes[32];
    want_s[b] = QuantizeQdq8(&x[b * 32], 32, codes).scale;
    for (int k = 0; k < 32; ++k) want[b * 32 + k] = E4m3ToF32(codes[k]);
  }
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> v(x.size()), sc(want_s.size());
    QuantizeQdq8Blocks(x.data(), blocks, v.data(), sc.data());
    for (int64_t b = 0; b < blocks; ++b) {
      ASSERT_EQ(0, std::memcmp(&sc[b], &want_s[b], 4)) << hwy::TargetName(target) << " block " << b;
      ASSERT_EQ(0, std::memcmp(&v[b * 32], &want[b * 32], 32 * 4)) << hwy::TargetName(target) << " block " << b;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(VectorOpsTest, RoundBf16InPlaceMatchesTheScalarRoundingOnEveryTarget) {
  std::mt19937 rng(12);
  std::vector<uint32_t> bits(100003);  // (a length no vector width divides: the scalar tail too)
  for (auto& u : bits) u = static_cast<uint32_t>(rng());
  // Ties (the low half exactly 0x8000) either way, the largest finite values, infinities, NaNs.
  for (uint32_t u : {0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0xFF7F8000u, 0x7F800000u, 0xFF800000u, 0x7F800001u,
                     0xFFC00000u, 0x00008000u, 0x80018000u})
    bits.push_back(u);
  std::vector<float> x(bits.size()), want(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  for (size_t i = 0; i < x.size(); ++i) want[i] = RoundBf16(x[i]);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> v = x;
    RoundBf16InPlace(v.data(), static_cast<int64_t>(v.size()));
    EXPECT_EQ(0, std::memcmp(v.data(), want.data(), v.size() * 4)) << hwy::TargetName(target);
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(VectorOpsTest, Bf16ExponentRangeIgnoresZerosOnEveryTarget) {
  const std::vector<uint16_t> v = {0x0000, 0x8000, F32ToBf16(0.25f), F32ToBf16(-48.0f), 0x0000};
  std::mt19937 rng(13);
  std::vector<uint16_t> random(10007);  // (no vector width divides it: the tail too)
  for (auto& u : random) u = static_cast<uint16_t>(rng());
  int lo = 1000, hi = -1000;  // the loop the function must agree with
  for (uint16_t u : random)
    if ((u & 0x7FFF) != 0) lo = std::min(lo, ((u & 0x7FFF) >> 7) - 127), hi = std::max(hi, ((u & 0x7FFF) >> 7) - 127);
  const uint16_t sub = 0x0001, inf = 0x7F80;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const ExponentRange r = Bf16ExponentRange(v.data(), static_cast<int64_t>(v.size()));
    EXPECT_EQ(-2, r.lo) << hwy::TargetName(target);
    EXPECT_EQ(5, r.hi) << hwy::TargetName(target);
    EXPECT_FALSE(Bf16ExponentRange(v.data(), 2).known()) << hwy::TargetName(target);
    EXPECT_EQ(-127, Bf16ExponentRange(&sub, 1).lo) << "a subnormal";
    EXPECT_TRUE(Bf16ExponentRange(&inf, 1).known()) << "an infinity alone is not 'none'";
    EXPECT_EQ(128, Bf16ExponentRange(&inf, 1).hi);
    const ExponentRange rr = Bf16ExponentRange(random.data(), static_cast<int64_t>(random.size()));
    EXPECT_EQ(lo, rr.lo) << hwy::TargetName(target);
    EXPECT_EQ(hi, rr.hi) << hwy::TargetName(target);
    std::vector<uint16_t> zeros(100, 0x8000);
    zeros[97] = F32ToBf16(3.0f);  // in the scalar tail on wide targets
    EXPECT_EQ(1, Bf16ExponentRange(zeros.data(), 100).lo) << hwy::TargetName(target);
  }
  hwy::SetSupportedTargetsForTest(0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, VectorOpsTargetsTest,
                         ::testing::Values(Shape{64, 512, 5}, Shape{48, 64, 3}, Shape{32, 128, 64}, Shape{16, 32, 1},
                                           Shape{19, 96, 7}, Shape{3, 64, 2}));

}  // namespace
}  // namespace ds41
