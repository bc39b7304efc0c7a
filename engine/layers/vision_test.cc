// The vision tower's pieces (engine/layers/vision.h): the 2-D RoPE table and rotation, the aligner's
// unfold order, grid planning against the span cap, the span layout and the Engine's errors, on the
// tiny-vision checkpoint. Agreement with the oracle: tests/oracle (ctest -R oracle_vision).
#include "engine/layers/vision.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/config/presets.h"
#include "engine/engine.h"
#include "engine/kernels/numerics.h"
#include "engine/loading/tensor_table.h"
#include "tests/support/model_suite.h"
#include "tests/support/test_checkpoint.h"

namespace ds41 {
namespace {

TEST(VisionRope, RowAnglesThenColumnAnglesOverHalfTheHead) {
  const int hd = 32, rd = 16, nf = 8, n_h = 3, n_w = 5;
  std::vector<float> cos, sin;
  VisionRopeTable(n_h, n_w, hd, 10000.0, &cos, &sin);
  ASSERT_EQ(cos.size(), static_cast<size_t>(n_h * n_w * rd));
  for (int j = 0; j < rd; ++j) {  // patch (0, 0) does not turn
    EXPECT_EQ(cos[j], 1.0f);
    EXPECT_EQ(sin[j], 0.0f);
  }
  const int t = 2 * n_w + 3;  // row 2, column 3
  for (int i = 0; i < nf; ++i) {
    const double inv = 1.0 / std::pow(10000.0, 2.0 * i / rd);
    EXPECT_NEAR(cos[t * rd + i], std::cos(2 * inv), 1e-6) << i;
    EXPECT_NEAR(sin[t * rd + i], std::sin(2 * inv), 1e-6) << i;
    EXPECT_NEAR(cos[t * rd + nf + i], std::cos(3 * inv), 1e-6) << i;
    EXPECT_NEAR(sin[t * rd + nf + i], std::sin(3 * inv), 1e-6) << i;
  }
  EXPECT_EQ(sin[t * rd + 0], static_cast<float>(std::sin(2.0)));  // inv_freq[0] = 1 exactly
}

TEST(VisionRope, RotateHalfPairsElementIWithIPlusHalfTheHead) {
  const int hd = 32;
  std::vector<float> cos(hd / 2, 0.0f), sin(hd / 2, 1.0f);  // a quarter turn everywhere
  std::vector<float> x(hd, 0.0f);
  x[3] = 1.0f;
  x[16 + 5] = 2.0f;
  ApplyVisionRope(x.data(), hd, cos.data(), sin.data());
  // [x1 cos - x2 sin, x2 cos + x1 sin] = [-x2, x1]
  for (int i = 0; i < hd; ++i) {
    const float want = i == 5 ? -2.0f : i == 16 + 3 ? 1.0f : 0.0f;
    EXPECT_EQ(x[i], want) << i;
  }
}

TEST(AlignerUnfold, ChannelMajorColumnsRowMajorBlocksZeroPadding) {
  const int n_vit_h = 3, n_vit_w = 5, C = 2, r = 2;  // padded to 4 x 6: 2 x 3 blocks
  std::vector<float> x(n_vit_h * n_vit_w * C);
  for (int t = 0; t < n_vit_h * n_vit_w; ++t)
    for (int c = 0; c < C; ++c) x[t * C + c] = static_cast<float>(100 * t + c + 1);
  std::vector<float> out(2 * 3 * C * r * r, -1.0f);
  AlignerUnfold(x.data(), n_vit_h, n_vit_w, C, r, out.data());
  for (int bh = 0; bh < 2; ++bh)
    for (int bw = 0; bw < 3; ++bw)
      for (int c = 0; c < C; ++c)
        for (int ky = 0; ky < r; ++ky)
          for (int kx = 0; kx < r; ++kx) {
            const int y = bh * r + ky, xx = bw * r + kx;
            const float want = (y < n_vit_h && xx < n_vit_w) ? static_cast<float>(100 * (y * n_vit_w + xx) + c + 1) : 0.0f;
            EXPECT_EQ(out[(bh * 3 + bw) * C * r * r + c * r * r + ky * r + kx], want) << bh << bw << c << ky << kx;
          }
}

TEST(ImageGridPlan, SpanCapCountsDelimitersAndRefusesEmptyGridsAndTextModels) {
  const ModelConfig c = TinyVisionConfig();  // downsample 3, cap 30
  auto g = VisionGrid(c, 12, 10);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->n_h, 4);
  EXPECT_EQ(g->n_w, 4);
  EXPECT_EQ(g->span_length(), 4 * 5 + 2);
  auto over = VisionGrid(c, 13, 13);  // 5 x 5 tokens: 32 positions
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("vision_max_n_token"), std::string::npos);
  EXPECT_EQ(VisionGrid(c, 0, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(VisionGrid(TinyConfig(), 3, 3).status().code(), StatusCode::kInvalidArgument);
  // The release: a 1344 x 1344 image is planned to 93 x 93 patches, 31 x 31 tokens, 994 positions.
  auto rel = VisionGrid(ReleaseConfig(), 93, 93);
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->span_length(), 994);
  EXPECT_FALSE(VisionGrid(ReleaseConfig(), 96, 96).ok());  // 32 x 32 tokens: 1058 > 1024
}

TEST(VisionConfig, RoundTripsAndListsTheTowerTensors) {
  const ModelConfig c = TinyVisionConfig();
  auto back = ModelConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), c.ToJson());
  EXPECT_EQ(back->vision_n_layers, 2);
  EXPECT_EQ(back->vision_patch_size, 4);
  EXPECT_TRUE(back->vision);
  int blocks = 0;
  bool w1 = false;
  ForEachTensor(c, [&](const TensorSpec& s) {
    blocks += s.name.rfind("vision.blocks.", 0) == 0;
    if (s.name == "vision.blocks.1.mlp.w1.weight") w1 = s.shape == std::vector<int64_t>{2 * 96, 64};
  });
  EXPECT_EQ(blocks, 2 * 8);  // wqkv and wo (weight, bias), w1, w2, norm1, norm2
  EXPECT_TRUE(w1);
  EXPECT_FALSE(IsIgnoredTensorName(c, "vision.norm.weight"));
  EXPECT_TRUE(IsIgnoredTensorName(TinyConfig(), "vision.norm.weight"));
  ModelConfig bad = TinyVisionConfig();
  bad.vision_n_heads = 3;  // 64 / 3
  EXPECT_FALSE(bad.Validate().ok());
  bad = TinyVisionConfig();
  bad.image_token_id = -1;
  EXPECT_FALSE(bad.Validate().ok());
}

class VisionEngineTest : public testing::ModelSuite<VisionEngineTest> {
 public:
  static std::string Checkpoint() { return testing::WriteTestCheckpoint(TinyVisionConfig(), 1, "tiny-vision"); }

  static std::vector<float> Patches(int64_t n, int inputs, int seed) {
    std::vector<float> p(static_cast<size_t>(n) * inputs);
    for (size_t i = 0; i < p.size(); ++i) p[i] = RoundBf16(static_cast<float>(std::sin(0.37 * i + seed)));
    return p;
  }
};

TEST_F(VisionEngineTest, SpanLayoutStartRowsNewlinesEnd) {
  Engine e(*model_);
  const int h = 7, w = 5;  // 3 x 2 tokens
  auto rows = e.EncodeImage(Patches(h * w, cfg().vision_patch_inputs(), 1), h, w);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  const int D = cfg().dim;
  ASSERT_EQ(rows->size(), static_cast<size_t>(6 * D));
  auto span = e.ImageSpanEmbeds(*rows, h, w);
  ASSERT_TRUE(span.ok());
  ASSERT_EQ(span->size(), static_cast<size_t>((3 * 3 + 2) * D));
  const VisionWeights& vw = model_->weights().vision;
  auto row_is = [&](int pos, auto value_at) {
    for (int i = 0; i < D; ++i)
      if ((*span)[static_cast<size_t>(pos) * D + i] != value_at(i)) return false;
    return true;
  };
  EXPECT_TRUE(row_is(0, [&](int i) { return vw.image_start.at(i); }));
  EXPECT_TRUE(row_is(10, [&](int i) { return vw.image_end.at(i); }));
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 2; ++x)
      EXPECT_TRUE(row_is(1 + y * 3 + x, [&](int i) { return (*rows)[static_cast<size_t>(y * 2 + x) * D + i]; })) << y << x;
    EXPECT_TRUE(row_is(1 + y * 3 + 2, [&](int i) { return vw.image_newline.at(i); })) << y;
  }
  for (float v : *rows) ASSERT_EQ(v, RoundBf16(v));  // bf16 values, as REF's aligner returns
}

TEST_F(VisionEngineTest, DeterministicAndIndependentOfThePool) {
  Engine e(*model_);
  Engine single(*model_, nullptr);
  const auto p = Patches(12 * 11, cfg().vision_patch_inputs(), 2);
  auto a = e.EncodeImage(p, 12, 11);
  auto b = single.EncodeImage(p, 12, 11);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

TEST_F(VisionEngineTest, ErrorsNameTheProblem) {
  Engine e(*model_);
  const int K = cfg().vision_patch_inputs();
  EXPECT_EQ(e.EncodeImage(Patches(9, K, 1), 3, 4).status().code(), StatusCode::kInvalidArgument);  // 9 patches for 12
  EXPECT_EQ(e.EncodeImage(nullptr, 3, 3).status().code(), StatusCode::kInvalidArgument);
  auto over = e.EncodeImage(Patches(13 * 13, K, 1), 13, 13);
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.ImageSpanEmbeds(std::vector<float>(5), 3, 3).status().code(), StatusCode::kInvalidArgument);
  auto tiny = Model::Open(testing::TinyCheckpoint());
  ASSERT_TRUE(tiny.ok());
  Engine text(**tiny);
  auto none = text.EncodeImage(Patches(1, 48, 1), 1, 1);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no vision"), std::string::npos);
}

}  // namespace
}  // namespace ds41
