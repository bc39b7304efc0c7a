#include <gtest/gtest.h>

#include <random>
#include <string>

#include "image/image_decode.h"
#include "image/image_expand.h"
#include "image/image_patches.h"
#include "image/image_plan.h"
#include "image/image_source.h"

namespace ds41::image {
namespace {

ImagePlan Plan(int64_t w, int64_t h, const ImageGeometry& g = {}) {
  auto plan = PlanImageGrid(w, h, g);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : ImagePlan{};
}

// MODEL.md §9.2: 1344x1344 is planned to 31x31, 994 positions (not the paper's 1,024).
TEST(PlanImageGrid, SquareFromTheSpec) {
  const ImagePlan p = Plan(1344, 1344);
  EXPECT_EQ(p.n_llm_h, 31);
  EXPECT_EQ(p.n_llm_w, 31);
  EXPECT_EQ(NumImageTokens(p), 994);
  EXPECT_EQ(p.best_width, 1302);
  EXPECT_EQ(p.best_height, 1302);
  EXPECT_EQ(p.n_vit_w, 93);
  EXPECT_TRUE(p.pad);
}

// Small images are upscaled to about min_pixels (544x544): 39x39 patches, 13x13 tokens.
TEST(PlanImageGrid, TinyIsUpscaled) {
  const ImagePlan p = Plan(1, 1);
  EXPECT_EQ(p.best_width, 546);
  EXPECT_EQ(p.best_height, 546);
  EXPECT_EQ(p.n_llm_w, 13);
  EXPECT_EQ(NumImageTokens(p), 13 * 14 + 2);
}

TEST(PlanImageGrid, TallAndWideCollapse) {
  const ImagePlan tall = Plan(1, 100000);
  EXPECT_EQ(tall.n_llm_w, 1);
  EXPECT_EQ(tall.n_llm_h, 511);
  EXPECT_EQ(NumImageTokens(tall), 1024);
  const ImagePlan wide = Plan(100000, 1);
  EXPECT_EQ(wide.n_llm_h, 1);
  EXPECT_EQ(wide.n_llm_w, 1021);
  EXPECT_EQ(NumImageTokens(wide), 1024);
}

TEST(PlanImageGrid, MaxWhRatioStretches) {
  ImageGeometry g;
  g.max_wh_ratio = 2.0;
  const ImagePlan p = Plan(3000, 500, g);  // planned as 1000x500
  EXPECT_FALSE(p.pad);
  EXPECT_EQ(p.best_width, Plan(1000, 500).best_width);
  EXPECT_TRUE(Plan(999, 500, g).pad);
  EXPECT_FALSE(Plan(1000, 500, g).pad);  // load_image stretches on >=
}

TEST(PlanImageGrid, RejectsBadInput) {
  EXPECT_FALSE(PlanImageGrid(0, 10, {}).ok());
  EXPECT_FALSE(PlanImageGrid(10, -1, {}).ok());
  ImageGeometry bad;
  bad.patch_size = 0;
  EXPECT_FALSE(PlanImageGrid(10, 10, bad).ok());
}

// The property the release asserts: no size exceeds max_n_token, for several caps.
TEST(PlanImageGrid, NeverExceedsMaxNToken) {
  std::mt19937_64 rng(7);
  for (int cap : {4, 5, 16, 100, 1024, 4096}) {
    ImageGeometry g;
    g.max_n_token = cap;
    for (int i = 0; i < 3000; ++i) {
      const int64_t w = 1 + static_cast<int64_t>(rng() % (i % 2 ? 20000 : 3000));
      const int64_t h = 1 + static_cast<int64_t>(rng() % (i % 3 ? 3000 : 20000));
      auto plan = PlanImageGrid(w, h, g);
      if (!plan.ok()) continue;  // refused, never over the cap
      EXPECT_LE(NumImageTokens(*plan), cap) << w << "x" << h;
      EXPECT_EQ(plan->n_vit_w * g.patch_size, plan->best_width);
      EXPECT_EQ(static_cast<int64_t>(SpanPositionTypes(*plan).size()), NumImageTokens(*plan));
    }
  }
}

TEST(DataUrl, Base64IsStrict) {
  EXPECT_EQ(*DecodeBase64("aGVsbG8="), "hello");
  EXPECT_EQ(*DecodeBase64(""), "");
  EXPECT_FALSE(DecodeBase64("aGVsbG8").ok());    // unpadded
  EXPECT_FALSE(DecodeBase64("aGVs bG8=").ok());  // whitespace
  EXPECT_FALSE(DecodeBase64("aGVsbG9=").ok());   // non-zero pad bits
  EXPECT_FALSE(DecodeBase64("aG=sbG8=").ok());
  EXPECT_FALSE(DecodeBase64("====").ok());
}

TEST(DataUrl, RefusesRemoteAndOtherFormats) {
  ImageLimits limits;
  auto remote = ParseImageDataUrl("https://example.com/a.png", limits);
  ASSERT_FALSE(remote.ok());
  EXPECT_NE(remote.status().message().find("does not fetch URLs"), std::string::npos);
  auto webp = ParseImageDataUrl("data:image/webp;base64,AAAA", limits);
  ASSERT_FALSE(webp.ok());
  EXPECT_NE(webp.status().message().find("unsupported image format"), std::string::npos);
  EXPECT_FALSE(ParseImageDataUrl("data:image/png,rawbytes", limits).ok());
  EXPECT_FALSE(ParseImageDataUrl("data:image/png;base64,aGVsbG8=", limits).ok());  // not a PNG
  // PNG signature only: accepted here, refused by the decoder.
  auto sig = ParseImageDataUrl("data:image/jpg;base64,iVBORw0KGgo=", limits);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_FALSE(DecodeImage(*sig, limits).ok());
  limits.max_encoded_bytes = 4;
  auto big = ParseImageDataUrl("data:image/png;base64," + std::string(4000, 'A'), limits);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger than"), std::string::npos);
}

// A 2x1 8-bit RGB PNG (red, blue), written by hand: signature, IHDR, IDAT (stored zlib), IEND.
std::string TinyPng();

TEST(Decode, PngAndLimits) {
  auto img = DecodeImage(TinyPng(), {});
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->width, 2);
  EXPECT_EQ(img->height, 1);
  EXPECT_EQ(img->rgb, (std::vector<uint8_t>{255, 0, 0, 0, 0, 255}));
  ImageLimits small;
  small.max_pixels = 1;
  auto refused = DecodeImage(TinyPng(), small);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("over the limits"), std::string::npos);
  std::string truncated = TinyPng().substr(0, 40);
  EXPECT_FALSE(DecodeImage(truncated, {}).ok());
  EXPECT_FALSE(DecodeImage(std::string("\xFF\xD8\xFF\xE0garbage", 11), {}).ok());  // broken JPEG
}

TEST(Patches, ShapeAndValues) {
  RgbImage gray{2, 2, std::vector<uint8_t>(12, 255)};
  const ImageGeometry g;
  const ImagePlan plan = Plan(2, 2, g);
  auto patches = ImagePatches(gray, plan, g);
  ASSERT_TRUE(patches.ok());
  EXPECT_EQ(patches->size(), static_cast<size_t>(plan.n_vit_w) * plan.n_vit_h * 3 * 14 * 14);
  for (float v : *patches) EXPECT_EQ(v, 1.0f);  // white upscaled stays white (square: no padding)
}

TEST(Expand, SpansAndTypes) {
  const ImagePlan a = Plan(1344, 1344), b = Plan(1, 1);
  const PlannedImage images[] = {{a, {1}}, {b, {2}}};
  const int32_t tokens[] = {5, 99, 6, 99};
  auto out = ExpandImageTokens(tokens, 99, images);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->spans.size(), 2u);
  EXPECT_EQ(out->spans[0].start, 1);
  EXPECT_EQ(out->spans[1].start, 1 + 994 + 1);
  EXPECT_EQ(out->tokens.size(), 2 + 994 + NumImageTokens(b));
  EXPECT_EQ(out->types[0], SpanPosition::kText);
  EXPECT_EQ(out->types[1], SpanPosition::kStart);
  EXPECT_EQ(out->types[1 + 32], SpanPosition::kNewline);
  EXPECT_EQ(out->types[994], SpanPosition::kEnd);
  EXPECT_EQ(out->tokens[500], 99);
  EXPECT_FALSE(ExpandImageTokens(tokens, 99, std::span(images, 1)).ok());
}

TEST(Expand, HashFollowsPixels) {
  RgbImage x{1, 1, {1, 2, 3}}, y{1, 1, {1, 2, 4}};
  const ImagePlan p = Plan(1, 1);
  EXPECT_EQ(ImageContentHash(x, p), ImageContentHash(RgbImage{1, 1, {1, 2, 3}}, p));
  EXPECT_NE(ImageContentHash(x, p), ImageContentHash(y, p));
}

uint32_t Crc(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char ch : s) {
    c ^= ch;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string Chunk(const std::string& type, const std::string& data) {
  return Be32(static_cast<uint32_t>(data.size())) + type + data + Be32(Crc(type + data));
}

std::string TinyPng() {
  const std::string raw("\x00\xff\x00\x00\x00\x00\xff", 7);  // filter 0, two RGB pixels
  uint32_t a = 1, b = 0;
  for (unsigned char ch : raw) {
    a = (a + ch) % 65521;
    b = (b + a) % 65521;
  }
  std::string z("\x78\x01\x01", 3);  // zlib header, one final stored block
  z += static_cast<char>(raw.size());
  z += '\0';
  z += static_cast<char>(~raw.size() & 0xFF);
  z += '\xff';
  z += raw + Be32((b << 16) | a);
  std::string ihdr = Be32(2) + Be32(1) + std::string("\x08\x02\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + Chunk("IHDR", ihdr) + Chunk("IDAT", z) + Chunk("IEND", "");
}

}  // namespace
}  // namespace ds41::image
