// Surface: image parts of chat requests (image/): data URLs whose base64 payload is a PNG or JPEG
// file from the client, decoded by libpng/libjpeg, planned and cut into ViT patches.
//
// Input: byte 0 bit 0 picks the form (0: the rest is the image file; 1: the rest is the url text);
// bytes 1-3 pick a small geometry (patch 1..8, downsample 1..3, max_n_token 4..67) so the patches
// of any size stay cheap; the limits are small (1 MiB, 2^20 pixels, 2048 per side).
// Properties: no crash; a decoded image has 3 * width * height bytes and the header's size; the
// plan stays within max_n_token with best sizes that are multiples of the patch; the patches have
// n_vit_h * n_vit_w * 3 * p * p values, all in [-1, 1]; the span types have NumImageTokens entries.
#include <string>

#include "fuzz/fuzz_support.h"
#include "image/image_decode.h"
#include "image/image_expand.h"
#include "image/image_patches.h"
#include "image/image_plan.h"
#include "image/image_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ds41::image;
  ds41::fuzz::ByteReader in(data, size);
  const bool url = in.Bool();
  ImageGeometry g;
  g.patch_size = 1 + static_cast<int>(in.Below(8));
  g.downsample_ratio = 1 + static_cast<int>(in.Below(3));
  g.max_n_token = 4 + static_cast<int>(in.Below(64));
  g.min_pixels = 64;
  ImageLimits limits;
  limits.max_encoded_bytes = 1u << 20;
  limits.max_pixels = 1 << 20;
  limits.max_side = 2048;
  std::string bytes = in.Rest();
  if (url) {
    auto parsed = ParseImageDataUrl(bytes, limits);
    if (!parsed.ok()) return 0;
    bytes = std::move(*parsed);
  }
  auto header = ReadImageHeader(bytes, limits);
  auto rgb = DecodeImage(bytes, limits);
  if (!rgb.ok()) return 0;
  DS41_FUZZ_CHECK(header.ok() && header->width == rgb->width && header->height == rgb->height);
  DS41_FUZZ_CHECK(rgb->rgb.size() == static_cast<size_t>(rgb->width) * rgb->height * 3);
  auto plan = PlanImageGrid(rgb->width, rgb->height, g);
  if (!plan.ok()) return 0;
  DS41_FUZZ_CHECK(NumImageTokens(*plan) <= g.max_n_token);
  DS41_FUZZ_CHECK(plan->best_width == plan->n_vit_w * g.patch_size && plan->best_height == plan->n_vit_h * g.patch_size);
  DS41_FUZZ_CHECK(static_cast<int64_t>(SpanPositionTypes(*plan).size()) == NumImageTokens(*plan));
  auto patches = ImagePatches(*rgb, *plan, g);
  if (!patches.ok()) return 0;  // e.g. too thin to resize to its plan
  DS41_FUZZ_CHECK(patches->size() ==
                  static_cast<size_t>(plan->n_vit_h) * plan->n_vit_w * 3 * g.patch_size * g.patch_size);
  for (float v : *patches) DS41_FUZZ_CHECK(v >= -1.0f && v <= 1.0f);
  ImageContentHash(*rgb, *plan);
  return 0;
}
