// Image span planning: how many ViT patches and LLM positions an image of a given size becomes.
//
// Mirrors the release's image_processor.py (plan_image_grid / safe_resize / solve_resize_ratio /
// llm_grid / num_image_tokens), including Python's int/floor/ceil and float semantics. A span is
// [start] ([image] * n_llm_w [newline]) * n_llm_h [end]; its length counts the delimiters
// (MODEL.md §9.2). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "util/status.h"

namespace ds41::image {

// The vision keys of the model config (config.json vision_*); the integration maps the engine's
// config onto this. Defaults are DeepSeek-V4.1-Flash's.
struct ImageGeometry {
  int patch_size = 14;            // vision_patch_size
  int downsample_ratio = 3;       // vision_downsample_ratio (the aligner's 3x3 merge)
  int max_n_token = 1024;         // vision_max_n_token: cap on the whole span, delimiters included
  int64_t min_pixels = 295936;    // vision_min_pixels: smaller images are upscaled to about this
  std::optional<double> max_wh_ratio;  // vision_max_wh_ratio (null in the release)

  // InvalidArgument unless patch_size, downsample_ratio >= 1, max_n_token >= 4 (one-cell span),
  // min_pixels >= 0 and max_wh_ratio (when set) > 0.
  Status Validate() const;
};

// The resize plan of one image: the pixel size it is resized to, the ViT patch grid and the LLM
// token grid.
struct ImagePlan {
  int best_width = 0, best_height = 0;  // pixels after resizing (multiples of patch_size)
  int n_vit_w = 0, n_vit_h = 0;         // ViT patches = best / patch_size
  int n_llm_w = 0, n_llm_h = 0;         // LLM image tokens per row / rows
  // True when the release pads (aspect-preserving resize onto a gray canvas); false when it
  // stretches (the max_wh_ratio branch of load_image).
  bool pad = true;
  bool operator==(const ImagePlan&) const = default;
};

// n_llm_h * (n_llm_w + 1) + 2: every position of the span, delimiters included.
inline int64_t NumImageTokens(int n_llm_h, int n_llm_w) {
  return static_cast<int64_t>(n_llm_h) * (n_llm_w + 1) + 2;
}
inline int64_t NumImageTokens(const ImagePlan& plan) { return NumImageTokens(plan.n_llm_h, plan.n_llm_w); }

// The release's plan_image_grid for an image of width x height pixels. InvalidArgument for a
// non-positive size or an invalid geometry; never more than geometry.max_n_token positions.
StatusOr<ImagePlan> PlanImageGrid(int64_t width, int64_t height, const ImageGeometry& geometry);

// Position types inside a span (the release's IMAGE_START, IMAGE, IMAGE_NEW_LINE, IMAGE_END);
// kText marks positions outside any span.
enum class SpanPosition : int8_t { kText = -1, kStart = 0, kImage = 1, kNewline = 2, kEnd = 3 };

// The span's types in order: start, (image * n_llm_w, newline) * n_llm_h, end.
std::vector<SpanPosition> SpanPositionTypes(const ImagePlan& plan);

}  // namespace ds41::image
