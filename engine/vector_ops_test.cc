// Attention's vector kernels give the canonical bits (docs/numerics.md) on every SIMD target.
#include "engine/vector_ops.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

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

INSTANTIATE_TEST_SUITE_P(Shapes, VectorOpsTargetsTest,
                         ::testing::Values(Shape{64, 512, 5}, Shape{48, 64, 3}, Shape{32, 128, 64}, Shape{16, 32, 1},
                                           Shape{19, 96, 7}, Shape{3, 64, 2}));

}  // namespace
}  // namespace ds41
