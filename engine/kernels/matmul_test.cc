// Every SIMD target and every thread count gives the scalar reference's bits.
#include "engine/kernels/matmul.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "engine/kernels/kernels.h"
#include "engine/kernels/matmul_bf16_dot.h"
#include "engine/kernels/numerics.h"
#include "engine/kernels/vector_ops.h"
#include "engine/loading/weight_tiles.h"
#include "util/thread_pool.h"

namespace ds41 {
namespace {

struct Case {
  int64_t m, n, k;
};

std::vector<uint8_t> RandomFp8(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    do b = static_cast<uint8_t>(rng()); while ((b & 0x7F) == 0x7F);  // no NaN codes
  }
  return v;
}

std::vector<uint8_t> RandomScales(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(120 + rng() % 10);
  return v;
}

std::vector<float> RandomBf16Values(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = RoundBf16(d(rng));
  return v;
}

class MatmulTargetsTest : public ::testing::TestWithParam<Case> {};

TEST_P(MatmulTargetsTest, EveryTargetAndThreadCountMatchesTheScalarReference) {
  const Case c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.m * 1000 + c.n * 10 + c.k));
  const std::vector<float> x = RandomBf16Values(rng, static_cast<size_t>(c.m * c.k));
  QuantActs qa;
  QuantizeActs(x.data(), c.m, c.k, &qa);
  const auto w8 = RandomFp8(rng, static_cast<size_t>(c.n * c.k));
  const auto s8 = RandomScales(rng, static_cast<size_t>((c.n + 31) / 32 * (c.k / 32)));
  std::vector<uint8_t> w4(static_cast<size_t>(c.n * c.k / 2));
  for (auto& b : w4) b = static_cast<uint8_t>(rng());
  const auto s4 = RandomScales(rng, static_cast<size_t>(c.n * c.k / 32));
  std::vector<uint16_t> wb(static_cast<size_t>(c.n * c.k));
  for (auto& v : wb) v = F32ToBf16(RandomBf16Values(rng, 1)[0]);
  // Row-major and tile-major (weight_tiles.h) copies of the same weights.
  std::vector<uint8_t> t8(static_cast<size_t>(Fp8TilesBytes(c.n, c.k))), t4(static_cast<size_t>(Fp4TilesBytes(c.n, c.k)));
  PackFp8Tiles(w8.data(), c.n, c.k, t8.data());
  PackFp4Tiles(w4.data(), c.n, c.k, t4.data());
  const Fp8Linear fp8{w8.data(), s8.data(), c.n, c.k};
  const Fp4Linear fp4{w4.data(), s4.data(), c.n, c.k};
  const Fp8Linear fp8_tiles{w8.data(), s8.data(), c.n, c.k, t8.data()};
  std::vector<uint8_t> ts4(static_cast<size_t>(Fp4ScaleTilesBytes(c.n, c.k)));
  PackFp4ScaleTiles(s4.data(), c.n, c.k, ts4.data());
  const Fp4Linear fp4_tiles{w4.data(), s4.data(), c.n, c.k, t4.data(), ts4.data()};
  const Fp4Linear fp4_tiles_row_scales{w4.data(), s4.data(), c.n, c.k, t4.data()};
  Bf16View bf;
  bf.p = reinterpret_cast<const uint8_t*>(wb.data());
  bf.rows = c.n;
  bf.cols = c.k;
  bf.exponents = Bf16ExponentRange(wb.data(), static_cast<int64_t>(wb.size()));  // (as PackedWeights sets it)
  ASSERT_TRUE(bf.exponents.known());
  std::vector<uint8_t> tb(static_cast<size_t>(Bf16TilesBytes(c.n, c.k)));
  PackBf16Tiles(bf.p, c.n, c.k, tb.data());
  Bf16View bf_tiles = bf;
  bf_tiles.tiles = tb.data();

  const size_t out = static_cast<size_t>(c.m * c.n);
  std::vector<float> r8(out), r4(out), rb(out), ru(out);
  reference::MatMulFp8(qa, fp8, r8.data());
  reference::MatMulFp4(qa, fp4, r4.data());
  reference::MatMulBf16(x.data(), c.m, bf, rb.data());
  reference::MatMulFp8Unquantized(x.data(), c.m, fp8, ru.data());

  ThreadPool pool3(3);
  // On CPUs with AVX512-BF16 the AVX-512 targets may run blocks of 8+ rows and decode rows on
  // VDPBF16PS: every combination ChooseMatmulKernels can leave.
  const bool has_dot = bf16dot::Supported();
  for (int mode = 0; mode < 4; ++mode) {
    const bool blocks = (mode & 1) != 0, decode = (mode & 2) != 0;
    if ((blocks || decode) && !has_dot) continue;
    bf16dot::SetEnabled(blocks, decode);
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool3}) {
        std::vector<float> y8(out), y4(out), yb(out), yu(out), y8t(out), y4t(out), yut(out), ybt(out), y4r(out);
        MatMulFp8(qa, fp8, y8.data(), pool);
        MatMulFp4(qa, fp4, y4.data(), pool);
        MatMulFp8(qa, fp8_tiles, y8t.data(), pool);
        MatMulFp4(qa, fp4_tiles, y4t.data(), pool);
        MatMulFp4(qa, fp4_tiles_row_scales, y4r.data(), pool);
        MatMulFp8Unquantized(x.data(), c.m, fp8_tiles, yut.data(), pool);
        MatMulBf16(x.data(), c.m, bf_tiles, ybt.data(), pool);
        MatMulBf16(x.data(), c.m, bf, yb.data(), pool);
        MatMulFp8Unquantized(x.data(), c.m, fp8, yu.data(), pool);
        const std::string where = std::string(hwy::TargetName(target)) + (pool ? " threads=3" : " threads=1") +
                                  (blocks ? "" : " bf16-dot blocks off") + (decode ? "" : " bf16-dot decode off");
        EXPECT_EQ(0, std::memcmp(y8.data(), r8.data(), out * 4)) << "fp8 " << where;
        EXPECT_EQ(0, std::memcmp(y4.data(), r4.data(), out * 4)) << "fp4 " << where;
        EXPECT_EQ(0, std::memcmp(y8t.data(), r8.data(), out * 4)) << "fp8 tile-major " << where;
        EXPECT_EQ(0, std::memcmp(y4t.data(), r4.data(), out * 4)) << "fp4 tile-major " << where;
        EXPECT_EQ(0, std::memcmp(y4r.data(), r4.data(), out * 4)) << "fp4 tile-major, row-major scales " << where;
        EXPECT_EQ(0, std::memcmp(yut.data(), ru.data(), out * 4)) << "fp8 unquantized tile-major " << where;
        EXPECT_EQ(0, std::memcmp(ybt.data(), rb.data(), out * 4)) << "bf16 tile-major " << where;
        EXPECT_EQ(0, std::memcmp(yb.data(), rb.data(), out * 4)) << "bf16 " << where;
        EXPECT_EQ(0, std::memcmp(yu.data(), ru.data(), out * 4)) << "fp8 unquantized " << where;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  bf16dot::SetEnabled(true);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulTargetsTest,
                         ::testing::Values(Case{1, 1, 32}, Case{1, 16, 64}, Case{3, 37, 96}, Case{70, 70, 160},
                                           Case{2, 129, 256}, Case{65, 33, 32},
                                           // one row against full groups of 64 rows and a partial one
                                           Case{1, 144, 96}, Case{1, 64, 32},
                                           // 2..7 rows (a routed expert's tokens): chunks of 4, then 3, 2, 1
                                           Case{7, 64, 64}, Case{5, 130, 32}, Case{6, 64, 96},
                                           // 8+ rows against groups of 1, 2 and 3 tiles (all row chunkings)
                                           Case{9, 16, 32}, Case{12, 32, 96}, Case{19, 40, 64},
                                           // and of 4 tiles: 5-row steps, 4-row steps (8 = 4 + 4, 13 = 5 + 4 + 4)
                                           Case{8, 64, 64}, Case{13, 70, 32}));

// A chain of -0 products is -0 in the canonical order (it starts from the first product); a kernel
// that starts its chains from +0 would return +0 here.
TEST(MatmulTest, AllNegativeZeroProductsStayNegativeZero) {
  constexpr int64_t n = 16, k = 64;
  const std::vector<uint8_t> w(static_cast<size_t>(n * k), 0xB8), s(static_cast<size_t>(k / 32), 127);  // -1.0
  std::vector<uint8_t> t(static_cast<size_t>(Fp8TilesBytes(n, k)));
  PackFp8Tiles(w.data(), n, k, t.data());
  const Fp8Linear fp8{w.data(), s.data(), n, k}, fp8_tiles{w.data(), s.data(), n, k, t.data()};
  // Decode rows (1, 3: per-tile blocks for row-major weights) and block rows (8), on every target, by
  // the FMA kernels, then by VDPBF16PS's where the CPU has them.
  for (const int64_t m : {1, 3, 8}) {
    const std::vector<float> x(static_cast<size_t>(m * k), 0.0f);
    QuantActs qa;
    QuantizeActs(x.data(), m, k, &qa);
    std::vector<float> ref(static_cast<size_t>(m * n)), y(ref.size()), yt(ref.size());
    reference::MatMulFp8(qa, fp8, ref.data());
    ASSERT_TRUE(std::signbit(ref[0]));
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      for (const bool dot : {false, true}) {
        if (dot && !bf16dot::Supported()) continue;
        bf16dot::SetEnabled(dot, dot);
        MatMulFp8(qa, fp8, y.data(), nullptr);
        MatMulFp8(qa, fp8_tiles, yt.data(), nullptr);
        const std::string where = std::string(hwy::TargetName(target)) + " rows " + std::to_string(m) + (dot ? " VDPBF16PS" : " FMA");
        EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), ref.size() * 4)) << where;
        EXPECT_EQ(0, std::memcmp(yt.data(), ref.data(), ref.size() * 4)) << where << ", tile-major";
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  bf16dot::SetEnabled(true);
}

// bf16 activations against FP8 codes (wo_a) whose products would be subnormal: the VDPBF16PS kernel
// would flush them, so such activations must take the FMA kernel, which keeps the reference's bits.
TEST(MatmulTest, TinyUnquantizedActivationsKeepTheirSubnormalProducts) {
  constexpr int64_t m = 8, n = 16, k = 64;
  std::mt19937 rng(7);
  std::vector<float> x(static_cast<size_t>(m * k), 0.0f);
  x[0] = std::ldexp(1.0f, -130);      // subnormal input
  x[k + 1] = std::ldexp(1.0f, -120);  // normal input, subnormal products
  for (int64_t i = 2 * k; i < m * k; ++i) x[i] = RoundBf16(std::normal_distribution<float>(0.0f, 1.0f)(rng));
  const auto w = RandomFp8(rng, static_cast<size_t>(n * k));
  const std::vector<uint8_t> s(static_cast<size_t>(k / 32), 127);
  std::vector<uint8_t> t(static_cast<size_t>(Fp8TilesBytes(n, k)));
  PackFp8Tiles(w.data(), n, k, t.data());
  const Fp8Linear fp8{w.data(), s.data(), n, k}, fp8_tiles{w.data(), s.data(), n, k, t.data()};
  std::vector<float> ref(static_cast<size_t>(m * n)), y(ref.size()), yt(ref.size());
  reference::MatMulFp8Unquantized(x.data(), m, fp8, ref.data());
  MatMulFp8Unquantized(x.data(), m, fp8, y.data(), nullptr);
  MatMulFp8Unquantized(x.data(), m, fp8_tiles, yt.data(), nullptr);
  EXPECT_NE(0.0f, ref[0]);
  EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), ref.size() * 4));
  EXPECT_EQ(0, std::memcmp(yt.data(), ref.data(), ref.size() * 4));
}

// bf16 weights small enough that some products with ordinary activations are subnormal: the
// VDPBF16PS kernels would flush them, so these activations must take the FMA kernels (rows 1 and 8:
// the decode kernel and the block kernel).
TEST(MatmulTest, TinyBf16WeightsKeepTheirSubnormalProducts) {
  constexpr int64_t n = 64, k = 64;
  std::mt19937 rng(9);
  std::vector<uint16_t> wb(static_cast<size_t>(n * k));
  for (auto& v : wb) v = F32ToBf16(RandomBf16Values(rng, 1)[0]);
  wb[0] = F32ToBf16(std::ldexp(1.0f, -125));  // times 2^-3 (below) is 2^-128
  Bf16View bf;
  bf.p = reinterpret_cast<const uint8_t*>(wb.data());
  bf.rows = n;
  bf.cols = k;
  bf.exponents = Bf16ExponentRange(wb.data(), n * k);
  std::vector<uint8_t> tb(static_cast<size_t>(Bf16TilesBytes(n, k)));
  PackBf16Tiles(bf.p, n, k, tb.data());
  bf.tiles = tb.data();
  for (int64_t m : {1, 8}) {
    // Row 0 is one product, 2^-128; the other rows are ordinary.
    std::vector<float> x = RandomBf16Values(rng, static_cast<size_t>(m * k));
    std::fill(x.begin(), x.begin() + k, 0.0f);
    x[0] = 0.125f;
    std::vector<float> ref(static_cast<size_t>(m * n)), y(ref.size());
    reference::MatMulBf16(x.data(), m, bf, ref.data());
    ASSERT_EQ(std::ldexp(1.0f, -128), ref[0]);
    MatMulBf16(x.data(), m, bf, y.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), ref.size() * 4)) << m << " rows";
  }
}

// What ActsSafe accepts: exactly-bf16 values whose products with the weights' exponents keep every
// partial sum normal and finite.
TEST(MatmulTest, ActsSafeProvesProductsNormalAndFinite) {
  if (!bf16dot::Available()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  const ExponentRange w{-20, 3};
  std::vector<float> x(64, 0.0f);
  EXPECT_TRUE(bf16dot::ActsSafe(x.data(), 64, 64, w));  // all zeros
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, ExponentRange{}));  // weights unknown
  x[5] = 1.5f;
  x[40] = -std::ldexp(1.0f, -92);  // -92 - 20 - 14 = -126: the grid is still normal
  EXPECT_TRUE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[40] = -std::ldexp(1.0f, -93);
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[40] = 0.0f;
  x[7] = 1.0f + std::ldexp(1.0f, -10);  // not a bf16 value
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[7] = std::ldexp(1.0f, 116);  // 116 + 3 + 2 + log2(64) = 127: finite
  EXPECT_TRUE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[7] = std::ldexp(1.0f, 117);
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[7] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[5] = 0.0f;  // inf or NaN the only nonzero values
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[7] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, w));
  x[5] = 1.5f;
  x[7] = std::ldexp(1.0f, -130);  // subnormal
  EXPECT_FALSE(bf16dot::ActsSafe(x.data(), 64, 64, ExponentRange{0, 0}));
}

// The choice is made once, applied, and reported as applied.
TEST(MatmulTest, KernelChoiceIsTimedOnceAndApplied) {
  ThreadPool pool(2);
  const std::string first = ChooseMatmulKernels(&pool);
  std::printf("[ kernels ] %s\n", first.c_str());
  EXPECT_EQ(first, ChooseMatmulKernels(nullptr));
  if (bf16dot::FromEnvironment() == bf16dot::Setting::kOn) {
    EXPECT_TRUE(bf16dot::Available() || !bf16dot::Supported());
  } else if (bf16dot::Supported()) {
    const size_t split = first.find(';');
    ASSERT_NE(std::string::npos, split) << first;
    EXPECT_EQ(bf16dot::Available(), first.substr(0, split).find("-> VDPBF16PS") != std::string::npos) << first;
    EXPECT_EQ(bf16dot::DecodeAvailable(), first.substr(split).find("-> VDPBF16PS") != std::string::npos) << first;
  } else {
    EXPECT_FALSE(bf16dot::Available());
  }
  bf16dot::SetEnabled(true);
}

// The decision from the timings: each shape on its own, VDPBF16PS only where strictly faster, decode
// only where the CPU has the decode kernels.
TEST(MatmulTest, KernelDecisionFollowsTheTimings) {
  auto decide = [](double fb, double db, double fd, double dd, bool decode_supported) {
    const MatmulKernelChoice c = DecideMatmulKernels({fb, db, fd, dd}, decode_supported);
    return std::make_pair(c.blocks_dot, c.decode_dot);
  };
  EXPECT_EQ(decide(1.0, 0.5, 1.0, 0.5, true), std::make_pair(true, true));
  EXPECT_EQ(decide(0.5, 1.0, 0.5, 1.0, true), std::make_pair(false, false));
  EXPECT_EQ(decide(1.0, 0.5, 0.5, 1.0, true), std::make_pair(true, false));  // each shape its own
  EXPECT_EQ(decide(0.5, 1.0, 1.0, 0.5, true), std::make_pair(false, true));
  EXPECT_EQ(decide(1.0, 1.0, 1.0, 1.0, true), std::make_pair(false, false));  // a tie keeps FMA
  EXPECT_EQ(decide(1.0, 0.5, 1.0, 0.5, false), std::make_pair(true, false));  // no decode kernels
}

TEST(MatmulTest, TargetsAreReported) {
  std::string names;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) names += std::string(hwy::TargetName(t)) + " ";
  std::printf("[ simd ] targets on this CPU: %s; chosen: %s; VDPBF16PS kernel: %s; decode on it: %s\n", names.c_str(),
              MatmulTargetName(), bf16dot::Available() ? "yes" : "no (CPU lacks AVX512-BF16, or DS41_BF16_DOT=0)",
              bf16dot::DecodeAvailable() ? "yes" : "no (needs AVX512-BF16 and AVX512-VBMI)");
  EXPECT_GE(hwy::SupportedAndGeneratedTargets().size(), 1u);
}

}  // namespace
}  // namespace ds41
