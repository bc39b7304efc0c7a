#include "image/image_expand.h"

#include <string>

#include "util/sha256.h"

namespace ds41::image {
namespace {

void PutU32(Sha256& h, uint32_t v) {
  const uint8_t b[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
                        static_cast<uint8_t>(v >> 24)};
  h.Update(b, 4);
}

}  // namespace

ImageHash ImageContentHash(const RgbImage& rgb, const ImagePlan& plan) {
  Sha256 h;
  h.Update("ds41-image-v1");  // versioned: a change of the hashed fields changes every key
  PutU32(h, static_cast<uint32_t>(rgb.width));
  PutU32(h, static_cast<uint32_t>(rgb.height));
  h.Update(rgb.rgb.data(), rgb.rgb.size());
  for (int v : {plan.best_width, plan.best_height, plan.n_vit_w, plan.n_vit_h, plan.n_llm_w, plan.n_llm_h,
                plan.pad ? 1 : 0}) {
    PutU32(h, static_cast<uint32_t>(v));
  }
  return h.Digest();
}

StatusOr<ExpandedPrompt> ExpandImageTokens(std::span<const int32_t> tokens, int32_t image_token_id,
                                           std::span<const PlannedImage> images) {
  size_t placeholders = 0;
  size_t total = tokens.size();
  for (int32_t t : tokens) placeholders += t == image_token_id;
  if (placeholders != images.size()) {
    return InvalidArgumentError("found " + std::to_string(placeholders) + " image placeholders but got " +
                                std::to_string(images.size()) + " images");
  }
  for (const PlannedImage& img : images) total += static_cast<size_t>(NumImageTokens(img.plan)) - 1;
  ExpandedPrompt out;
  out.tokens.reserve(total);
  out.types.reserve(total);
  out.spans.reserve(images.size());
  size_t next = 0;
  for (int32_t t : tokens) {
    if (t != image_token_id) {
      out.tokens.push_back(t);
      out.types.push_back(SpanPosition::kText);
      continue;
    }
    const PlannedImage& img = images[next++];
    out.spans.push_back({static_cast<int64_t>(out.tokens.size()), img.plan, img.hash});
    const std::vector<SpanPosition> types = SpanPositionTypes(img.plan);
    out.tokens.insert(out.tokens.end(), types.size(), image_token_id);
    out.types.insert(out.types.end(), types.begin(), types.end());
  }
  return out;
}

}  // namespace ds41::image
