#include "engine/loading/engram_layout.h"

#include <gtest/gtest.h>

#include "engine/loading/numpy_random.h"
#include "engine/config/presets.h"

namespace ds41 {
namespace {

TEST(EngramLayoutTest, ReleaseConstantsReproduceThePublishedRowCounts) {
  auto layout = EngramLayout::Build(ReleaseConfig());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->layers().size(), 2u);
  const EngramLayerLayout& l1 = layout->layers()[0];
  const EngramLayerLayout& l14 = layout->layers()[1];
  EXPECT_EQ(l1.rows, 384006168);
  EXPECT_EQ(l14.rows, 384016682);
  // Appendix A.
  const std::vector<int64_t> l1_2gram = {16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133, 16000183};
  EXPECT_EQ(std::vector<int64_t>(l1.moduli.begin(), l1.moduli.begin() + 8), l1_2gram);
  EXPECT_EQ(l1.moduli[23], 16000463);
  EXPECT_EQ(l14.moduli[0], 16000477);
  EXPECT_EQ(l14.moduli[23], 16000889);
  EXPECT_EQ(l1.offsets[1], 16000057);
  EXPECT_EQ(l1.offsets[23], 368005705);
  EXPECT_EQ(l14.offsets[23], 368015793);
  EXPECT_EQ(l1.multipliers, (std::vector<int64_t>{76632096046245, 4839876093313, 35959672319349, 73987337458391}));
  EXPECT_EQ(l14.multipliers, (std::vector<int64_t>{67716810739261, 51510806800915, 30921347202721, 82619226485591}));
}

TEST(EngramLayoutTest, TinyConstants) {
  auto layout = EngramLayout::Build(TinyConfig());
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  const EngramLayerLayout& a = layout->layers()[0];
  const EngramLayerLayout& b = layout->layers()[1];
  EXPECT_EQ(a.moduli, (std::vector<int64_t>{1009, 1013, 1019, 1021, 1031, 1033}));
  EXPECT_EQ(a.offsets, (std::vector<int64_t>{0, 1009, 2022, 3041, 4062, 5093}));
  EXPECT_EQ(b.moduli, (std::vector<int64_t>{1039, 1049, 1051, 1061, 1063, 1069}));
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{0, 1039, 2088, 3139, 4200, 5263}));
  EXPECT_EQ(a.multipliers,
            (std::vector<int64_t>{29662608052400909, 1873410163432121, 13919202536988139, 28638879857136817}));
  EXPECT_EQ(b.multipliers,
            (std::vector<int64_t>{10655090275895937, 31608505986136395, 4210609209496719, 27210409204648803}));
}

TEST(EngramLayoutTest, RowCountMismatchIsRefused) {
  ModelConfig c = TinyConfig();
  c.engram_num_embeddings[1] = 6331;
  auto layout = EngramLayout::Build(c);
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("engram_num_embeddings[1]"), std::string::npos);
}

TEST(EngramLayoutTest, HashFollowsTheFormula) {
  auto layout = EngramLayout::Build(TinyConfig());
  ASSERT_TRUE(layout.ok());
  const EngramLayerLayout& a = layout->layers()[0];
  const int64_t hist[3] = {7, 9, kEngramBeforeStart};
  int64_t tok[4];
  layout->TokenTuple(5, hist, /*pad=*/1, tok);
  EXPECT_EQ(tok[0], 5);
  EXPECT_EQ(tok[1], 7);
  EXPECT_EQ(tok[2], 9);
  EXPECT_EQ(tok[3], 1);  // before the start: pad
  int64_t rows[6];
  layout->HashRows(0, tok, rows);
  const int64_t r2 = (5 * a.multipliers[0]) ^ (7 * a.multipliers[1]);
  const int64_t r3 = r2 ^ (9 * a.multipliers[2]);
  const int64_t r4 = r3 ^ (1 * a.multipliers[3]);
  EXPECT_EQ(rows[0], r2 % 1009);
  EXPECT_EQ(rows[1], r2 % 1013 + 1009);
  EXPECT_EQ(rows[3], r3 % 1021 + 3041);
  EXPECT_EQ(rows[5], r4 % 1033 + 5093);
  // A dead token blocks the look-back for good, and a dead current token pads everything.
  const int64_t dead_hist[3] = {7, kEngramDead, 3};
  layout->TokenTuple(5, dead_hist, 1, tok);
  EXPECT_EQ(tok[1], 7);
  EXPECT_EQ(tok[2], 1);
  EXPECT_EQ(tok[3], 1);
  layout->TokenTuple(kEngramDead, hist, 1, tok);
  EXPECT_EQ(tok[0], 1);
  EXPECT_EQ(tok[1], 1);
}

TEST(NumpyRandomTest, IntegersMatchNumpy) {
  // numpy.random.default_rng(0).integers(0, 2**40, size=3, dtype=np.int64)
  NumpyPcg64 rng(0);
  auto v = rng.Integers(int64_t{1} << 40, 3);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<int64_t>{700346781657, 296633628802, 45050865998}));
}

TEST(PrimeTest, MillerRabin) {
  EXPECT_TRUE(IsPrime(2));
  EXPECT_TRUE(IsPrime(16000057));
  EXPECT_FALSE(IsPrime(16000059));
  EXPECT_TRUE(IsPrime(18446744073709551557ull));
  EXPECT_FALSE(IsPrime(3215031751ull));  // strong pseudoprime to bases 2, 3, 5, 7
  EXPECT_EQ(NextUnusedPrime(15999999, {}), 16000057);
  EXPECT_EQ(NextUnusedPrime(15999999, {16000057}), 16000079);
}

}  // namespace
}  // namespace ds41
