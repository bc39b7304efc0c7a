#include "image/image_plan.h"

#include <cmath>
#include <string>

namespace ds41::image {
namespace {

// Python's a // b for a >= 0, b > 0 on ints.
int64_t FloorDiv(int64_t a, int64_t b) { return a / b; }

// llm_grid: ceil((best // p) / ds), true division then ceil as Python does (exact for ints).
void LlmGrid(int64_t best_h, int64_t best_w, const ImageGeometry& g, int64_t* h, int64_t* w) {
  *h = static_cast<int64_t>(std::ceil(static_cast<double>(FloorDiv(best_h, g.patch_size)) / g.downsample_ratio));
  *w = static_cast<int64_t>(std::ceil(static_cast<double>(FloorDiv(best_w, g.patch_size)) / g.downsample_ratio));
}

int64_t Tokens(int64_t h, int64_t w) { return h * (w + 1) + 2; }

// solve_resize_ratio: height and width are Python numbers (float once max_wh_ratio applied).
void SolveResizeRatio(double height, double width, const ImageGeometry& g, int64_t* best_h, int64_t* best_w) {
  const double r = height / width;
  const double max_w_float = std::sqrt((g.max_n_token - 2) / r + 0.25) - 0.5;
  const double max_h_float = max_w_float * r;
  const int64_t cell = static_cast<int64_t>(g.patch_size) * g.downsample_ratio;
  if (max_w_float < 1.0) {  // very tall: one column
    *best_h = FloorDiv(g.max_n_token - 2, 2) * cell;
    *best_w = cell;
    return;
  }
  if (max_h_float < 1.0) {  // very wide: one row
    *best_h = cell;
    *best_w = (g.max_n_token - 3) * cell;
    return;
  }
  const double beta = std::min(std::floor(max_w_float) * static_cast<double>(cell) / width,
                               std::floor(max_h_float) * static_cast<double>(cell) / height);
  *best_h = static_cast<int64_t>(std::floor(height * beta / g.patch_size)) * g.patch_size;
  *best_w = static_cast<int64_t>(std::floor(width * beta / g.patch_size)) * g.patch_size;
}

}  // namespace

Status ImageGeometry::Validate() const {
  if (patch_size < 1) return InvalidArgumentError("vision patch_size must be >= 1");
  if (downsample_ratio < 1) return InvalidArgumentError("vision downsample_ratio must be >= 1");
  if (max_n_token < 4) return InvalidArgumentError("vision max_n_token must be >= 4 (a one-cell span)");
  if (min_pixels < 0) return InvalidArgumentError("vision min_pixels must be >= 0");
  if (max_wh_ratio && !(*max_wh_ratio > 0)) return InvalidArgumentError("vision max_wh_ratio must be > 0");
  return Status::Ok();
}

StatusOr<ImagePlan> PlanImageGrid(int64_t width_px, int64_t height_px, const ImageGeometry& g) {
  DS41_RETURN_IF_ERROR(g.Validate());
  // Decoders cap sides far below this; the bound keeps every product below exact-double range.
  constexpr int64_t kMaxSide = int64_t{1} << 24;
  if (width_px < 1 || height_px < 1 || width_px > kMaxSide || height_px > kMaxSide) {
    return InvalidArgumentError("image size " + std::to_string(width_px) + "x" + std::to_string(height_px) +
                                " is out of range");
  }
  const int p = g.patch_size;
  // Python keeps width an int until max_wh_ratio multiplies it by a float; doubles hold these
  // ints exactly, so one double path reproduces both.
  double width = static_cast<double>(width_px), height = static_cast<double>(height_px);
  if (g.max_wh_ratio && width > height * *g.max_wh_ratio) width = height * *g.max_wh_ratio;
  const double area = width * height;
  if (0 < area && area < static_cast<double>(g.min_pixels)) {
    const double ratio = std::pow(static_cast<double>(g.min_pixels) / area, 0.5);  // Python's ** 0.5
    width = std::trunc(width * ratio);  // int()
    height = std::trunc(height * ratio);
  }
  int64_t best_w = static_cast<int64_t>(std::ceil(width / p)) * p;
  int64_t best_h = static_cast<int64_t>(std::ceil(height / p)) * p;
  int64_t n_h = 0, n_w = 0;
  LlmGrid(best_h, best_w, g, &n_h, &n_w);
  if (Tokens(n_h, n_w) > g.max_n_token) {
    SolveResizeRatio(height, width, g, &best_h, &best_w);
    LlmGrid(best_h, best_w, g, &n_h, &n_w);
  }
  // The release asserts this; an input that broke it (a degenerate size) is refused, not planned.
  if (Tokens(n_h, n_w) > g.max_n_token || best_w < p || best_h < p) {
    return InvalidArgumentError("image size " + std::to_string(width_px) + "x" + std::to_string(height_px) +
                                " cannot be planned within " + std::to_string(g.max_n_token) + " positions");
  }
  ImagePlan plan;
  plan.best_width = static_cast<int>(best_w);
  plan.best_height = static_cast<int>(best_h);
  plan.n_vit_w = static_cast<int>(best_w / p);
  plan.n_vit_h = static_cast<int>(best_h / p);
  plan.n_llm_w = static_cast<int>(n_w);
  plan.n_llm_h = static_cast<int>(n_h);
  // load_image stretches when width >= ratio * height (note >=, where the plan above caps on >).
  plan.pad = !(g.max_wh_ratio && static_cast<double>(width_px) >= *g.max_wh_ratio * static_cast<double>(height_px));
  return plan;
}

std::vector<SpanPosition> SpanPositionTypes(const ImagePlan& plan) {
  std::vector<SpanPosition> types;
  types.reserve(static_cast<size_t>(NumImageTokens(plan)));
  types.push_back(SpanPosition::kStart);
  for (int r = 0; r < plan.n_llm_h; ++r) {
    types.insert(types.end(), static_cast<size_t>(plan.n_llm_w), SpanPosition::kImage);
    types.push_back(SpanPosition::kNewline);
  }
  types.push_back(SpanPosition::kEnd);
  return types;
}

}  // namespace ds41::image
