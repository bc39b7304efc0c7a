// ViT input for one image: the release's load_image after decoding. The picture is fitted into
// plan.best_width x plan.best_height as PIL's ImageOps.pad does (aspect-preserving bicubic resize,
// centered on a 127-gray canvas) or stretched with a plain bicubic resize (plan.pad == false),
// normalized to (x/255 - 0.5)/0.5, rounded to bf16 and cut into patches. Pure; thread-safe.
#pragma once

#include <vector>

#include "image/image_decode.h"
#include "image/image_plan.h"
#include "util/status.h"

namespace ds41::image {

// PIL's Image.resize(size, BICUBIC) of an 8-bit RGB image, bit for bit: separable passes
// (horizontal first, each rounded to 8 bits), support scaled by the downscale factor, 22-bit
// fixed-point coefficients. InvalidArgument for an empty target or source.
StatusOr<RgbImage> ResizeBicubic(const RgbImage& src, int width, int height);

// The resized picture the patches are cut from (ImageOps.pad or a plain resize, per plan.pad).
StatusOr<RgbImage> FitToPlan(const RgbImage& src, const ImagePlan& plan);

// [n_vit_h * n_vit_w, 3 * p * p] floats holding bf16 values: patches in row-major grid order,
// inside a patch channel-major, then row, then column. REQUIRES: plan from PlanImageGrid with the
// same geometry.
StatusOr<std::vector<float>> ImagePatches(const RgbImage& rgb, const ImagePlan& plan, const ImageGeometry& geometry);

// The same patches from a picture already fitted (FitToPlan's output, n_vit_h * p by n_vit_w * p),
// as the nodes receive it. InvalidArgument when the picture is not that size.
StatusOr<std::vector<float>> CanvasPatches(const RgbImage& fitted, int n_vit_h, int n_vit_w, int patch_size);

}  // namespace ds41::image
