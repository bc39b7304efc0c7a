// The FP4 grid numerics (matmul_grid.h): every target, thread count, batch and the integer kernel
// give the reference's bits on the grid's activations, and they stay close to the canonical ones.
#include "engine/kernels/matmul_grid.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "engine/kernels/kernels.h"
#include "engine/kernels/numerics.h"
#include "engine/loading/weight_tiles.h"
#include "tests/support/random_operands.h"
#include "util/thread_pool.h"

namespace ds41 {
namespace {

using Fp4Weights = testing::RandomFp4Weights;

QuantActs RandomActs(std::mt19937& rng, int64_t m, int64_t k) { return testing::RandomQuantActs(rng, m, k); }

double RelL2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

struct Case {
  int64_t m, n, k;
};

class GridTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { amx_ = grid::AmxEnabled(); }
  void TearDown() override {
    SetFp4Numerics(Fp4Numerics::kCanonical);
    grid::SetAmxEnabled(amx_);
    hwy::SetSupportedTargetsForTest(0);
  }
  bool amx_ = false;
};

TEST_P(GridTest, EveryTargetThreadCountAndLayoutGivesTheReferenceBitsOnTheGrid) {
  const Case c = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(c.m * 7919 + c.n * 31 + c.k));
  const QuantActs qa = RandomActs(rng, c.m, c.k);
  const Fp4Weights w(rng, c.n, c.k);
  QuantActs g;
  ASSERT_TRUE(ToFp4Grid(qa, &g));
  const size_t out = static_cast<size_t>(c.m * c.n);
  std::vector<float> ref(out), canonical(out);
  reference::MatMulFp4(g, w.RowMajor(), ref.data());
  reference::MatMulFp4(qa, w.RowMajor(), canonical.data());
  // Close to the canonical numerics (equal unless a code below 1/8 is off the grid).
  EXPECT_LT(RelL2(ref, canonical), 1e-4);

  SetFp4Numerics(Fp4Numerics::kGrid);
  ThreadPool pool3(3);
  // With the AMX kernel (16+ rows, where the CPU has it) and without.
  for (const bool amx : {true, false}) {
    if (amx && !grid::AmxSupported()) continue;
    grid::SetAmxEnabled(amx);
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool3}) {
        std::vector<float> y(out), yt(out);
        MatMulFp4(qa, w.RowMajor(), y.data(), pool);
        MatMulFp4(qa, w.TileMajor(), yt.data(), pool);
        const std::string where =
            std::string(hwy::TargetName(target)) + (pool ? " threads=3" : " threads=1") + (amx ? " AMX" : "");
        EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), out * 4)) << "row-major " << where;
        EXPECT_EQ(0, std::memcmp(yt.data(), ref.data(), out * 4)) << "tile-major " << where;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GridTest,
                         ::testing::Values(Case{1, 64, 64}, Case{1, 144, 256}, Case{2, 64, 96}, Case{3, 130, 32},
                                           Case{4, 64, 64}, Case{5, 128, 64}, Case{7, 64, 160},
                                           // blocks of 8+ rows (the FMA kernels on grid values)
                                           Case{8, 64, 64}, Case{13, 70, 96}, Case{70, 64, 64},
                                           Case{5, 128, 256}, Case{3, 256, 128}, Case{4, 128, 256},
                                           // a full group of four tiles whose last rows are padding
                                           Case{3, 60, 64}, Case{9, 120, 96},
                                           // more than kParallelGrain values: packed by the pool's threads
                                           Case{40, 64, 4096}, Case{6, 64, 16384},
                                           // AMX (16+ rows) beside a partial group, and over one block
                                           Case{20, 70, 96}, Case{20, 64, 32}));

// A row's result does not depend on the rows beside it: each row alone equals its row in a batch of
// 1..20 (decode chunks of 4, 3, 2, 1, the 8+ row kernels and AMX's 16-row tiles).
TEST_F(GridTest, ARowsBitsDoNotDependOnItsBatch) {
  std::mt19937 rng(11);
  constexpr int64_t n = 128, k = 128, kRows = 20;
  const QuantActs all = RandomActs(rng, kRows, k);
  const Fp4Weights w(rng, n, k);
  SetFp4Numerics(Fp4Numerics::kGrid);
  std::vector<float> alone(static_cast<size_t>(kRows * n));
  for (int64_t r = 0; r < kRows; ++r) {
    QuantActs one;
    one.rows = 1;
    one.cols = k;
    one.codes.assign(all.codes.begin() + r * k, all.codes.begin() + (r + 1) * k);
    one.scales.assign(all.scales.begin() + r * (k / 32), all.scales.begin() + (r + 1) * (k / 32));
    MatMulFp4(one, w.TileMajor(), alone.data() + r * n, nullptr);
  }
  for (int64_t rows = 1; rows <= kRows; ++rows) {
    QuantActs batch = all;
    batch.rows = rows;
    batch.codes.resize(static_cast<size_t>(rows * k));
    batch.scales.resize(static_cast<size_t>(rows * (k / 32)));
    std::vector<float> y(static_cast<size_t>(rows * n));
    MatMulFp4(batch, w.TileMajor(), y.data(), nullptr);
    EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), y.size() * 4)) << rows << " rows";
  }
}

// Weights for the signed-zero cases (call Pack after any further edit): rows 0-15 hold code 0xA
// (-1.0) only, row 16 +0 and -0, the rest random.
Fp4Weights SignedZeroWeights(std::mt19937& rng, int64_t n, int64_t k) {
  Fp4Weights w(rng, n, k);
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t j = 0; j < k / 2; ++j) w.packed[static_cast<size_t>(r * k / 2 + j)] = 0xAA;
  for (int64_t j = 0; j < k / 2; ++j) w.packed[static_cast<size_t>(16 * k / 2 + j)] = 0x80;
  return w;
}

// Random activations whose last row is all zero and whose other rows' first block is.
QuantActs ZeroBlockActs(std::mt19937& rng, int64_t rows, int64_t k) {
  QuantActs qa = RandomActs(rng, rows, k);
  for (int64_t i = 0; i < rows * k; ++i)
    if (i / k == rows - 1 || i % k < 32) qa.codes[static_cast<size_t>(i)] = 0.0f;
  return qa;
}

// The integer kernel alone (where the CPU has it) against the reference on the grid, 1-4 rows,
// zero-sum blocks included: the last row's activations are all zero, so every block of it sums to
// zero, and its outputs are -0 against all-negative weights (rows 0-15), +0 against a -0/+0 mix
// (row 16) and against the rest; the other rows have one zero block among random ones.
TEST_F(GridTest, TheIntegerKernelGivesTheReferenceBitsSignedZerosIncluded) {
  if (!grid::KernelSupported()) GTEST_SKIP() << "skipped: no AVX512-VBMI and AVX512-VNNI";
  std::mt19937 rng(5);
  constexpr int64_t n = 64, k = 128;
  Fp4Weights w = SignedZeroWeights(rng, n, k);
  w.Pack();
  for (int rows = 1; rows <= grid::kRows; ++rows) {
    QuantActs qa = ZeroBlockActs(rng, rows, k);
    QuantActs g;
    ASSERT_TRUE(ToFp4Grid(qa, &g));
    std::vector<float> ref(static_cast<size_t>(rows * n)), y(ref.size());
    reference::MatMulFp4(g, w.RowMajor(), ref.data());
    const float* last = ref.data() + (rows - 1) * n;
    ASSERT_TRUE(std::signbit(last[0]) && last[0] == 0.0f);
    ASSERT_TRUE(!std::signbit(last[16]) && last[16] == 0.0f);
    std::vector<uint32_t> pairs(static_cast<size_t>(rows * k / 2));
    grid::PackActs(g.codes.data(), rows, k, pairs.data());
    grid::DecodeFp4Group(rows, pairs.data(), g.codes.data(), g.scales.data(), k, w.tiles.data(), w.tile_scales.data(),
                         y.data());
    EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), ref.size() * 4)) << rows << " rows";
  }
}

// The AMX kernel alone (where the CPU and the OS allow it) against the reference on the grid, for
// row counts around its 16-row tiles: zero-sum blocks as above, a row of the largest codes (+-448)
// against the largest weights, and a row whose block sums need all of fp32's 24 bits (31 products
// 28672 * 6 and one 1 * 0.5: 5,332,992.5), which a tile unit that rounded or truncated anywhere would lose.
TEST_F(GridTest, TheAmxKernelGivesTheReferenceBitsSignedZerosAndExtremesIncluded) {
  if (!grid::AmxSupported()) GTEST_SKIP() << "skipped: no AMX";
  std::mt19937 rng(9);
  constexpr int64_t n = 64, k = 160;
  Fp4Weights w = SignedZeroWeights(rng, n, k);
  for (int64_t j = 0; j < k / 2; ++j) {
    w.packed[static_cast<size_t>(17 * k / 2 + j)] = 0x77;  // +6, +6
    w.packed[static_cast<size_t>(18 * k / 2 + j)] = 0xFF;  // -6, -6
    w.packed[static_cast<size_t>(19 * k / 2 + j)] = j % 16 == 15 ? 0x17 : 0x77;  // +6, but +0.5 for k % 32 == 31
  }
  w.Pack();
  for (int rows : {1, 2, 8, 15, 16, 17, 33, 40}) {
    QuantActs qa = ZeroBlockActs(rng, rows, k);
    for (int64_t i = 0; i < (rows - 1) * k; ++i) {
      const int64_t r = i / k;
      if (r == 0 && rows > 1) qa.codes[static_cast<size_t>(i)] = (i % 3 == 0 ? -448.0f : 448.0f);
      if (r == 1 && rows > 2) qa.codes[static_cast<size_t>(i)] = i % 32 == 31 ? 1.0f / 64 : 448.0f;
    }
    QuantActs g;
    ASSERT_TRUE(ToFp4Grid(qa, &g));
    std::vector<float> ref(static_cast<size_t>(rows * n)), y(ref.size(), std::nanf(""));
    reference::MatMulFp4(g, w.RowMajor(), ref.data());
    const float* last = ref.data() + (rows - 1) * n;
    ASSERT_TRUE(std::signbit(last[0]) && last[0] == 0.0f);
    ASSERT_TRUE(!std::signbit(last[16]) && last[16] == 0.0f);
    const int64_t padded = (rows + grid::kAmxTileRows - 1) / grid::kAmxTileRows * grid::kAmxTileRows;
    std::vector<uint16_t> packed(static_cast<size_t>(padded * k), 0xFFFF);  // the padding is the packer's
    grid::PackAmxActs(g.codes.data(), rows, k, 0, rows, packed.data());
    grid::AmxFp4Group(rows, packed.data(), g.codes.data(), g.scales.data(), k, w.tiles.data(), w.tile_scales.data(),
                      y.data());
    EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), ref.size() * 4)) << rows << " rows";
  }
}

// The AMX kernel's operand layouts, where the CPU has the decode's instructions (AMX itself is not
// needed): TDPBF16PS emulated on PackAmxActs's A tiles and DecodeAmxBTile's B tiles (C[m][n] += A[m][2j]
// B[j][2n] + A[m][2j+1] B[j][2n+1] over j < 16, exact here) gives every block's exact sum.
TEST_F(GridTest, TheAmxOperandLayoutsGiveTheBlockSums) {
  if (!grid::KernelSupported()) GTEST_SKIP() << "skipped: no AVX512-VBMI and AVX512-VNNI";
  std::mt19937 rng(17);
  constexpr int64_t rows = 21, n = 16, k = 96, nb = k / 32, padded = 32;
  const Fp4Weights w(rng, n, k);
  QuantActs g;
  ASSERT_TRUE(ToFp4Grid(RandomActs(rng, rows, k), &g));
  std::vector<uint16_t> a(static_cast<size_t>(padded * k), 0xFFFF);
  grid::PackAmxActs(g.codes.data(), rows, k, 0, rows, a.data());
  auto bf16 = [](uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  for (int64_t b = 0; b < nb; ++b) {
    uint16_t bt[512];
    grid::DecodeAmxBTile(w.tiles.data() + b * kFp4TileBytes, bt);  // the one tile of 16 rows, block b
    for (int64_t r = 0; r < padded; ++r) {
      const uint16_t* arow = a.data() + ((r / 16) * nb + b) * 512 + (r % 16) * 32;
      for (int64_t c = 0; c < n; ++c) {
        double tile_sum = 0, exact = 0;
        for (int j = 0; j < 16; ++j)
          for (int p = 0; p < 2; ++p) tile_sum += double{bf16(arow[2 * j + p])} * bf16(bt[32 * j + 2 * c + p]);
        if (r < rows)
          for (int q = 0; q < 32; ++q) {
            const uint8_t byte = w.packed[static_cast<size_t>((c * k + b * 32 + q) / 2)];
            exact += double{g.codes[static_cast<size_t>(r * k + b * 32 + q)]} * kE2m1Values[q % 2 == 0 ? byte & 0xF : byte >> 4];
          }
        ASSERT_EQ(tile_sum, exact) << "row " << r << " column " << c << " block " << b;  // padding rows: 0
      }
    }
  }
}

// ZeroBlockSign (the kernels' sign of a zero block sum) against the canonical chain itself, over blocks
// of mostly zero values and weights (+-0 codes), random signs, and sums that cancel.
TEST_F(GridTest, AZeroBlockSumsSignIsTheCanonicalChains) {
  std::mt19937 rng(13);
  int zero_sums = 0, negative = 0;
  for (int trial = 0; trial < 200000; ++trial) {
    alignas(64) uint8_t tile[kFp4TileBytes] = {};
    float x[32];
    const int lane = static_cast<int>(rng() % 16);
    // Half the trials: every product zero, -0 but for about 2 % of them (so about half the blocks
    // sum to -0); the others: sparse values and weights whose nonzero products may cancel.
    const bool zeros = trial % 2 == 0;
    for (int k = 0; k < 32; ++k) {
      const uint32_t r = rng();
      const bool flip = r % 50 == 0;
      int code;
      if (zeros && (r & 64) != 0) {  // +0 times a weight whose sign makes the product -0
        x[k] = 0.0f;
        code = static_cast<int>((r >> 8) % 8) | (flip ? 0 : 8);
      } else if (zeros) {  // a nonzero value times a zero weight of the other sign
        x[k] = (r & 128) != 0 ? 2.0f : -1.0f;
        code = (x[k] > 0) != flip ? 8 : 0;
      } else {
        x[k] = (r & 3) != 0 ? 0.0f : static_cast<float>(static_cast<int>(r >> 8) % 5 - 2);  // never -0
        code = ((r >> 4) & 3) != 0 ? static_cast<int>((r >> 6) & 8) : static_cast<int>((r >> 12) & 15);
      }
      uint8_t& byte = tile[(k / 2) * kTileRows + lane];
      byte = static_cast<uint8_t>(k % 2 == 0 ? (byte & 0xF0) | code : (byte & 0x0F) | (code << 4));
    }
    float part = 0.0f;
    for (int k = 0; k < 32; ++k) {
      const uint8_t byte = tile[(k / 2) * kTileRows + lane];
      const float p = x[k] * kE2m1Values[k % 2 == 0 ? byte & 0xF : byte >> 4];
      part = k == 0 ? p : part + p;
    }
    if (part != 0.0f) continue;
    ++zero_sums;
    negative += std::signbit(part);
    ASSERT_EQ(std::signbit(part), std::signbit(grid::ZeroBlockSign(x, tile, lane))) << "trial " << trial;
  }
  EXPECT_GT(zero_sums, 1000);
  EXPECT_GT(negative, 10);
}

// The grid moves a code by at most half its step (1/128), keeps the scale's power of two exact, and
// a non-finite code is reported.
TEST_F(GridTest, TheGridRoundsCodesByAtMostHalfAStep) {
  std::mt19937 rng(3);
  QuantActs qa = RandomActs(rng, 4, 256);
  QuantActs g;
  ASSERT_TRUE(ToFp4Grid(qa, &g));
  for (size_t i = 0; i < qa.codes.size(); ++i) {
    EXPECT_LE(std::fabs(g.codes[i] / grid::kScale - qa.codes[i]), 1.0f / 128) << i;
    EXPECT_EQ(g.codes[i], std::nearbyint(g.codes[i]));
    EXPECT_LE(std::fabs(g.codes[i]), 448.0f * grid::kScale);
  }
  for (size_t i = 0; i < qa.scales.size(); ++i) EXPECT_EQ(g.scales[i] * grid::kScale, qa.scales[i]);
  // Codes off the grid move to the nearest step, ties to even (1/128 -> 0, 3/128 -> 2/64), and -0
  // becomes +0.
  qa.codes[4] = 1.0f / 128;
  qa.codes[5] = 3.0f / 128;
  qa.codes[6] = -0.0f;
  qa.codes[8] = 5.0f / 256;
  ASSERT_TRUE(ToFp4Grid(qa, &g));
  EXPECT_EQ(g.codes[4], 0.0f);
  EXPECT_FALSE(std::signbit(g.codes[4]));
  EXPECT_EQ(g.codes[5], 2.0f);
  EXPECT_FALSE(std::signbit(g.codes[6]));
  EXPECT_EQ(g.codes[8], 1.0f);
  qa.codes[7] = std::nanf("");
  EXPECT_FALSE(ToFp4Grid(qa, &g));
}

}  // namespace
}  // namespace ds41
