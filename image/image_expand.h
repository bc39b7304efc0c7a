// Expanding image placeholders in a token sequence into image spans (the release's
// prepare_vl_inputs), and the content hash that keys an image's encoder output.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "image/image_decode.h"
#include "image/image_plan.h"
#include "util/status.h"

namespace ds41::image {

using ImageHash = std::array<uint8_t, 32>;

// SHA-256 over the decoded pixels (size and RGB bytes) and the plan, so two encodings of one
// picture share a key exactly when their pixels are equal and they are planned alike.
ImageHash ImageContentHash(const RgbImage& rgb, const ImagePlan& plan);

// One image as the expansion needs it, in prompt order.
struct PlannedImage {
  ImagePlan plan;
  ImageHash hash{};
};

// Where an image's span landed in the expanded sequence.
struct ImageSpan {
  int64_t start = 0;  // position of the span's start delimiter
  ImagePlan plan;
  ImageHash hash{};
};

struct ExpandedPrompt {
  std::vector<int32_t> tokens;      // every span position carries image_token_id
  std::vector<SpanPosition> types;  // [tokens.size()]; kText outside spans
  std::vector<ImageSpan> spans;     // one per image, in order
};

// Replaces the i-th occurrence of image_token_id in `tokens` with images[i]'s span
// (NumImageTokens positions). InvalidArgument when the number of placeholders differs from the
// number of images.
StatusOr<ExpandedPrompt> ExpandImageTokens(std::span<const int32_t> tokens, int32_t image_token_id,
                                           std::span<const PlannedImage> images);

}  // namespace ds41::image
