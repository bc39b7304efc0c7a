// The limit loops run the instructions they count: each loop's result is checked against plain
// arithmetic, and the AMX tile products against a scalar product (skipped where the CPU has no AMX).
#include "bench/machine_limits.h"

#include <gtest/gtest.h>
#include <hwy/aligned_allocator.h>

#include <cmath>
#include <cstring>
#include <random>

#include "util/thread_pool.h"

namespace ds41 {
namespace {

float Bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(MachineLimitsTest, TriadAndSumComputeEveryElementIncludingTheTail) {
  for (const bool stream : {false, true}) {
    const int64_t n = 1000 + 13;  // not a multiple of any vector width
    auto a = hwy::AllocateAligned<float>(n), b = hwy::AllocateAligned<float>(n), c = hwy::AllocateAligned<float>(n);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = -1;
      b[i] = static_cast<float>(i);
      c[i] = static_cast<float>(i % 7);
    }
    TriadForTest(a.get(), b.get(), c.get(), 0.5f, n, stream);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], b[i] + 0.5f * c[i]) << "element " << i << " stream " << stream;
    EXPECT_EQ(SumForTest(c.get(), n), [&] {
      float s = 0;
      for (int64_t i = 0; i < n; ++i) s += c[i];
      return s;
    }());
  }
}

TEST(MachineLimitsTest, FmaLoopRunsTwelveChainsOfFusedMultiplyAdds) {
  const int64_t iters = 1000;
  float expect = 0;
  for (int j = 0; j < 12; ++j) {
    float c = 0.1f * static_cast<float>(j + 1);
    for (int64_t i = 0; i < iters; ++i) c = std::fma(1.0f, 0.999999f, c);
    expect += c;
  }
  EXPECT_NEAR(FmaLoopForTest(iters), expect, 1e-3f * expect);
}

TEST(MachineLimitsTest, EveryInt8DotLoopSumsFourSignedProductsPerLanePerStep) {
  const auto units = Int8DotLoopsForTest(1000);
  if (units.empty()) GTEST_SKIP() << "skipped: no int8 dot unit";
  for (const Int8LoopResult& u : units) EXPECT_EQ(u.value, int64_t{u.chains} * 1000 * 4 * 3 * -2) << u.unit;
}

TEST(MachineLimitsTest, Bf16DotLoopAddsTwoProductsPerLanePerStep) {
  const float got = Bf16DotLoopForTest(1000);
  if (got == 0) GTEST_SKIP() << "skipped: no AVX512-BF16";
  EXPECT_EQ(got, 12 * 1000 * 2.0f);
}

TEST(MachineLimitsTest, AmxBf16TileProductMatchesAScalarProduct) {
  std::mt19937 rng(1);
  uint16_t a[16 * 32], b[32 * 16];
  // Small integers: every product and sum is exact in fp32, so the tile must match bit for bit.
  for (auto& v : a) v = static_cast<uint16_t>(0x3F80 + (rng() % 4) * 0x80);  // 1, 2, 4, 8
  for (auto& v : b) v = static_cast<uint16_t>((rng() % 2 ? 0xBF80 : 0x3F80) + (rng() % 3) * 0x80);
  float c[16 * 16];
  if (!AmxBf16TileProduct(a, b, c)) GTEST_SKIP() << "skipped: no AMX";
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float s = 0;
      for (int k = 0; k < 32; ++k) s += Bf16ToFloat(a[m * 32 + k]) * Bf16ToFloat(b[k * 16 + n]);
      EXPECT_EQ(c[m * 16 + n], s) << m << "," << n;
    }
}

TEST(MachineLimitsTest, AmxInt8TileProductMatchesAScalarProduct) {
  std::mt19937 rng(2);
  int8_t a[16 * 64], b[64 * 16];
  for (auto& v : a) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  for (auto& v : b) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  int32_t c[16 * 16];
  if (!AmxInt8TileProduct(a, b, c)) GTEST_SKIP() << "skipped: no AMX";
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      int32_t s = 0;
      for (int k = 0; k < 64; ++k) s += a[m * 64 + k] * b[k * 16 + n];
      EXPECT_EQ(c[m * 16 + n], s) << m << "," << n;
    }
}

TEST(MachineLimitsTest, RatiosAreTakenAgainstTheBestLimitForTheOperation) {
  MachineLimits m;
  EXPECT_EQ(m.matrix_unit(), "none");
  m.read_bytes_per_s = 30e9;
  m.triad_stream_bytes_per_s = 42e9;  // its two read streams moved 28 GB/s
  m.triad_plain_bytes_per_s = 27e9;
  m.fma_flops = 400e9;
  m.bf16_dot_flops = 200e9;
  m.int8_dot_ops = 1600e9;
  m.int8_unit = "VPDPBUSD zmm, AVX512-VNNI";
  EXPECT_EQ(m.read_bandwidth(), 30e9);
  EXPECT_EQ(m.triad_bytes_per_s(), 42e9);
  EXPECT_EQ(m.matrix_peak(), 1600e9);
  EXPECT_EQ(m.matrix_unit(), "int8 dot (VPDPBUSD zmm, AVX512-VNNI)");
  m.amx_int8_ops = 8000e9;
  EXPECT_EQ(m.matrix_unit(), "AMX TDPBSSD");
  m.triad_stream_bytes_per_s = 48e9;  // 32 GB/s read
  EXPECT_EQ(m.read_bandwidth(), 32e9);
  m.triad_plain_bytes_per_s = 33e9;  // every counted byte read
  EXPECT_EQ(m.read_bandwidth(), 33e9);
}

}  // namespace
}  // namespace ds41
