// The images of a chat request, decoded and planned at the router (issue 27 item 3): what the
// cluster integration hands to the encoders together with the expanded prompt.
//
// Images come only as data URLs (the router never fetches remote URLs). Each is decoded to RGB8
// under ImageLimits, planned with the model's ImageGeometry, hashed for the encoder cache and
// fitted to its plan.
// Errors name the content part ("messages[0].content[1]: ..."). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chat/chat_render.h"
#include "image/image_decode.h"
#include "image/image_expand.h"
#include "image/image_plan.h"
#include "node_client/node_messages.h"
#include "util/status.h"

namespace ds41 {

// Whether and how the served model takes images. Off unless the model has a vision tower.
struct ImageInputOptions {
  bool enabled = false;              // the model config has a vision tower
  int32_t image_token_id = -1;       // config image_token_id: every span position carries it
  image::ImageGeometry geometry;     // the config's vision_* keys (the integration maps them)
  image::ImageLimits limits;
  size_t max_images = 16;            // per request
  // Decoded pixels of all of a request's images together, summed from their headers before any is
  // decoded: 16 images of limits.max_pixels each would be 1.7 GB of RGB and seconds of CPU.
  int64_t max_request_pixels = 72'000'000;
};

// One decoded image of a request, in prompt order.
struct RequestImage {
  std::string field;  // the content part it came from, e.g. "messages[0].content[1]"
  image::RgbImage fitted;  // the picture fitted to its plan (image/image_patches.h FitToPlan)
  image::ImagePlan plan;
  image::ImageHash hash{};
};

// What a chat request with images becomes before routing: the prompt with every placeholder
// expanded into its span, the per-position types and the images. Hook for the cluster
// integration: the encoders take `images` (pixels, plan, hash) and fill the spans.
struct ImagePrompt {
  std::vector<int32_t> tokens;
  std::vector<image::SpanPosition> types;
  std::vector<image::ImageSpan> spans;
  std::vector<RequestImage> images;
};

// Decodes, validates and plans every image. InvalidArgument whose message starts with the part's
// field: "this model does not accept images" when !options.enabled, too many images, remote or
// non-data URLs, unsupported formats, corrupt files and images over the limits; every header is
// read (and the request's pixels summed against max_request_pixels) before any image is decoded.
StatusOr<std::vector<RequestImage>> DecodeRequestImages(const std::vector<chat::ChatImage>& parts,
                                                        const ImageInputOptions& options);

// The field an error from DecodeRequestImages names (the text before ": "), for the error's param.
std::string ImageErrorField(const Status& s);

// Expands `prompt` (with one image_token_id per image) into an ImagePrompt.
StatusOr<ImagePrompt> ExpandRequestImages(std::span<const int32_t> prompt, std::vector<RequestImage> images,
                                          const ImageInputOptions& options);

// What the nodes take (node_client/node_messages.h PromptImage): each picture fitted to its plan,
// and the prompt's span positions replaced by the image's key tokens (unit/unit_key.h), so that the
// cache's keys tell pictures apart. Errors name the content part.
StatusOr<std::vector<PromptImage>> PromptImagesOf(ImagePrompt& prompt);

}  // namespace ds41
