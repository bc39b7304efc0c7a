// Attention's vector kernels give the canonical bits (docs/numerics.md) on every SIMD target.
#include "engine/kernels/vector_ops.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/numerics.h"

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

// The indexer's combination: scores of every sign and scale, ties on the bf16 grid, signed zeros and
// NaN, for head counts below, at and above a vector's lanes and key counts no width divides.
TEST(VectorOpsTest, IndexerKeyScoresMatchTheScalarCombinationOnEveryTarget) {
  std::mt19937 rng(13);
  for (int H : {1, 3, 4, 7, 16, 64}) {
    const int nkeys = 1001;
    std::vector<float> qk(static_cast<size_t>(nkeys) * H), w(H);
    for (auto& v : qk) v = std::ldexp(std::normal_distribution<float>(0.0f, 1.0f)(rng), static_cast<int>(rng() % 40) - 20);
    for (size_t i = 0; i < qk.size(); i += 17) {  // exact ties: the low half 0x8000
      uint32_t u;
      std::memcpy(&u, &qk[i], 4);
      u = (u & 0xFFFF0000u) | 0x8000u;
      std::memcpy(&qk[i], &u, 4);
    }
    qk[5 % qk.size()] = -0.0f;
    qk[11 % qk.size()] = std::nanf("");
    for (auto& v : w) v = RoundBf16(std::normal_distribution<float>(0.0f, 0.5f)(rng));
    std::vector<float> want(nkeys);
    for (int k = 0; k < nkeys; ++k) {
      double sum = 0.0;
      for (int h = 0; h < H; ++h) sum += RoundBf16(std::max(RoundBf16(qk[static_cast<size_t>(k) * H + h]), 0.0f) * w[h]);
      want[k] = RoundBf16(static_cast<float>(sum));
    }
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      std::vector<float> got(nkeys);
      IndexerKeyScores(qk.data(), H, nkeys, w.data(), got.data());
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4)) << hwy::TargetName(target) << " H " << H;
    }
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

// Float bit patterns spread over every exponent the softmax meets (and past float's normal
// results at both ends), plus the special values.
std::vector<float> ExpInputs() {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, -87.0f, -87.5f, 88.0f, 88.5f, -104.0f, -200.0f, 100.0f,
                          std::ldexp(1.0f, -140), -std::ldexp(1.0f, -140), -1e30f, 1e30f, INFINITY, -INFINITY, NAN};
  uint32_t lo, hi;
  const float a = -104.0f, b = 89.0f;
  std::memcpy(&lo, &a, 4);  // the negative range as bit patterns, -0 up to -104
  std::memcpy(&hi, &b, 4);
  for (uint32_t u = 0x80000000u; u <= lo; u += 2039) {
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  for (uint32_t u = 0; u <= hi; u += 2039) {
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  return x;
}

TEST(VectorOpsTest, ExpFManyMatchesExpFOnEveryTarget) {
  const std::vector<float> x = ExpInputs();
  std::vector<float> ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) ref[i] = ExpF(x[i]);
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> y(x.size());
    ExpFMany(x.data(), static_cast<int64_t>(x.size()), y.data());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < x.size(); ++i)
      if (std::memcmp(&y[i], &ref[i], 4) != 0 && bad++ == 0) first = i;
    EXPECT_EQ(0u, bad) << hwy::TargetName(target) << ": " << bad << " of " << x.size() << ", first exp(" << x[first]
                       << ") = " << y[first] << " vs " << ref[first];
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The scalar steps SoftmaxBlock replaces (AttendRow's loop before it was vectorized).
void SoftmaxBlockScalar(const float* s, int H, int nk, float* m, float* l, float* sf, double* pb) {
  for (int h = 0; h < H; ++h) {
    float bm = -INFINITY;
    for (int k = 0; k < nk; ++k) bm = std::max(bm, s[static_cast<size_t>(k) * H + h]);
    const float m_new = std::max(m[h], bm);
    sf[h] = ExpF(m[h] - m_new);
    double psum = 0.0;
    for (int k = 0; k < nk; ++k) {
      const float pk = ExpF(s[static_cast<size_t>(k) * H + h] - m_new);
      psum += pk;
      pb[static_cast<size_t>(h) * nk + k] = RoundBf16(pk);
    }
    l[h] = l[h] * sf[h] + static_cast<float>(psum);
    m[h] = m_new;
  }
}

TEST(VectorOpsTest, SoftmaxBlockMatchesTheScalarStepsOnEveryTarget) {
  std::mt19937 rng(5);
  for (const int H : {64, 19, 4, 1}) {
    for (const int nk : {64, 37, 1}) {
      // Three blocks in a row from the running state's start; the spread of the scores sends many
      // probabilities below float's normal range (the exact fallback's lanes).
      const int blocks = 3;
      std::vector<float> s(static_cast<size_t>(blocks) * nk * H);
      std::normal_distribution<float> d(0.0f, 1.0f);
      for (auto& v : s) v = d(rng) * (rng() % 4 == 0 ? 60.0f : 3.0f);
      // A NaN score (std::max keeps it out of the maximum) and heads whose scores are all zeros of
      // both signs (which zero becomes the maximum is std::max's pick).
      s[static_cast<size_t>(nk / 2) * H] = NAN;
      if (H > 1)
        for (int k = 0; k < blocks * nk; ++k) s[static_cast<size_t>(k) * H + 1] = (k % 2) ? 0.0f : -0.0f;
      std::vector<float> m0(static_cast<size_t>(H), -1e30f), l0(static_cast<size_t>(H), 0.0f), sf0(static_cast<size_t>(H));
      std::vector<double> pb0(static_cast<size_t>(H) * nk);
      std::vector<std::vector<double>> ref_pb;
      std::vector<std::vector<float>> ref_sf;
      for (int b = 0; b < blocks; ++b) {
        SoftmaxBlockScalar(&s[static_cast<size_t>(b) * nk * H], H, nk, m0.data(), l0.data(), sf0.data(), pb0.data());
        ref_pb.push_back(pb0);
        ref_sf.push_back(sf0);
      }
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        std::vector<float> m(static_cast<size_t>(H), -1e30f), l(static_cast<size_t>(H), 0.0f), sf(static_cast<size_t>(H));
        std::vector<double> pb(static_cast<size_t>(H) * nk);
        const std::string where = std::string(hwy::TargetName(target)) + " H " + std::to_string(H) + " nk " + std::to_string(nk);
        for (int b = 0; b < blocks; ++b) {
          SoftmaxBlock(&s[static_cast<size_t>(b) * nk * H], H, nk, m.data(), l.data(), sf.data(), pb.data());
          EXPECT_EQ(0, std::memcmp(pb.data(), ref_pb[b].data(), pb.size() * 8)) << where << " block " << b;
          EXPECT_EQ(0, std::memcmp(sf.data(), ref_sf[b].data(), sf.size() * 4)) << where << " block " << b;
        }
        EXPECT_EQ(0, std::memcmp(l.data(), l0.data(), l.size() * 4)) << where;
        EXPECT_EQ(0, std::memcmp(m.data(), m0.data(), m.size() * 4)) << where;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(VectorOpsTest, ScaleInPlaceAndRescaleAddMatchTheScalarExpressionsOnEveryTarget) {
  std::mt19937 rng(9);
  for (const int H : {64, 3}) {
    for (const int hd : {512, 37}) {  // (37: a lane remainder on every target)
      std::normal_distribution<float> d(0.0f, 1.0f);
      std::vector<float> acc0(static_cast<size_t>(H) * hd), sf(static_cast<size_t>(H));
      std::vector<double> pv(acc0.size());
      for (auto& v : acc0) v = d(rng) * 1e3f;
      for (auto& v : sf) v = std::exp(-std::fabs(d(rng)));
      for (auto& v : pv) v = static_cast<double>(d(rng)) * 1e3 + 1e-9 * d(rng);  // not exactly a float
      std::vector<float> ref = acc0, scaled_ref = acc0;
      for (int h = 0; h < H; ++h)
        for (int k = 0; k < hd; ++k) {
          const size_t i = static_cast<size_t>(h) * hd + k;
          ref[i] = ref[i] * sf[h] + static_cast<float>(pv[i]);
          scaled_ref[i] = scaled_ref[i] * 0.0441941738f;
        }
      for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        std::vector<float> acc = acc0, scaled = acc0;
        RescaleAdd(acc.data(), sf.data(), pv.data(), H, hd);
        ScaleInPlace(scaled.data(), static_cast<int64_t>(scaled.size()), 0.0441941738f);
        EXPECT_EQ(0, std::memcmp(acc.data(), ref.data(), ref.size() * 4)) << hwy::TargetName(target) << " H " << H << " hd " << hd;
        EXPECT_EQ(0, std::memcmp(scaled.data(), scaled_ref.data(), ref.size() * 4)) << hwy::TargetName(target);
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The float64 reductions may add in any order (docs/numerics.md): rounded to float32 they give the
// sequential sum's value on every target (for these inputs; in general but for ~2^-29 of sums).
TEST(VectorOpsTest, Float64ReductionsRoundToTheSequentialSumOnEveryTarget) {
  std::mt19937 rng(13);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const int64_t n : {20480, 5120, 37, 1}) {
    std::vector<float> x(static_cast<size_t>(n)), w(x.size());
    for (auto& v : x) v = d(rng);
    for (auto& v : w) v = d(rng) * 0.01f;
    double dot = 0.0, sq = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      dot += static_cast<double>(x[i]) * static_cast<double>(w[i]);
      sq += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    }
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      EXPECT_EQ(static_cast<float>(DotF32Weights(x.data(), reinterpret_cast<const uint8_t*>(w.data()), n)), static_cast<float>(dot))
          << hwy::TargetName(target) << " n " << n;
      EXPECT_EQ(static_cast<float>(SumOfSquares(x.data(), n)), static_cast<float>(sq)) << hwy::TargetName(target) << " n " << n;
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, VectorOpsTargetsTest,
                         ::testing::Values(Shape{64, 512, 5}, Shape{48, 64, 3}, Shape{32, 128, 64}, Shape{16, 32, 1},
                                           Shape{19, 96, 7}, Shape{3, 64, 2},
                                           // fewer heads than lanes (the small model's 4): keys as lanes
                                           Shape{4, 64, 37}, Shape{4, 128, 16}, Shape{1, 32, 9}, Shape{7, 64, 33},
                                           Shape{21, 64, 19}));

}  // namespace
}  // namespace ds41
