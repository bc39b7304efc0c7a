#include "serving/engine_prompt.h"

#include <algorithm>

#include "engine/layers/vision.h"
#include "image/image_patches.h"

namespace ds41 {

EnginePrompt::EnginePrompt(const Engine& engine, const ModelConfig& config, const std::vector<int32_t>& tokens,
                           const std::vector<PromptImage>& images)
    : engine_(engine), c_(config), tokens_(tokens), images_(images), rows_(images.size()) {}

StatusOr<TokenSpan> EnginePrompt::From(int64_t from, int64_t end) {
  const ModelConfig& c = c_;
  const int64_t n = end < 0 ? static_cast<int64_t>(tokens_.size()) : end;
  TokenSpan span;
  span.tokens.assign(tokens_.begin(), tokens_.begin() + n);
  if (images_.empty()) return span;
  span.image.assign(static_cast<size_t>(n), 0);
  span.image_embeds_from = std::clamp<int64_t>(from, 0, n);
  for (size_t k = 0; k < images_.size(); ++k) {
    const PromptImage& im = images_[k];
    DS41_ASSIGN_OR_RETURN(ImageGrid grid, VisionGrid(c, im.n_vit_h, im.n_vit_w));
    const int64_t a = im.start, b = std::min(n, im.start + grid.span_length());
    if (a >= n) break;
    for (int64_t p = a; p < b; ++p) {
      span.tokens[p] = c.image_token_id;
      span.image[p] = 1;
    }
    if (b <= span.image_embeds_from) continue;  // wholly before the rows asked for
    if (!rows_[k]) {
      const int p = c.vision_patch_size;
      image::RgbImage fitted{im.n_vit_w * p, im.n_vit_h * p,
                             std::vector<uint8_t>(im.pixels.begin(), im.pixels.end())};
      DS41_ASSIGN_OR_RETURN(std::vector<float> patches, image::CanvasPatches(fitted, im.n_vit_h, im.n_vit_w, p));
      DS41_ASSIGN_OR_RETURN(std::vector<float> aligned, engine_.EncodeImage(patches, im.n_vit_h, im.n_vit_w));
      DS41_ASSIGN_OR_RETURN(std::vector<float> embeds, engine_.ImageSpanEmbeds(aligned, im.n_vit_h, im.n_vit_w));
      rows_[k] = std::move(embeds);
      ++encoded_;
    }
    const int64_t lo = std::max(a, span.image_embeds_from);
    const size_t D = static_cast<size_t>(c.dim);
    span.image_embeds.insert(span.image_embeds.end(), rows_[k]->begin() + (lo - a) * D, rows_[k]->begin() + (b - a) * D);
  }
  return span;
}

}  // namespace ds41
