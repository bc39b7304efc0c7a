#include "image/image_patches.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace ds41::image {
namespace {

// Pillow's libImaging/Resample.c constants: bicubic with a = -0.5, support 2; 8-bit images use
// coefficients with 22 fractional bits (32 - 8 - 2).
constexpr double kBicubicSupport = 2.0;
constexpr int kPrecisionBits = 32 - 8 - 2;

double BicubicFilter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// One output sample's source window and its fixed-point weights.
struct Coeffs {
  int ksize = 0;
  std::vector<int> xmin, count;  // [out]
  std::vector<int32_t> k;        // [out * ksize]
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for the box [0, in_size).
Coeffs Precompute(int in_size, int out_size) {
  const double in0 = 0.0, in1 = in_size;
  const double scale = (in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kBicubicSupport * filterscale;
  Coeffs c;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.xmin.resize(out_size);
  c.count.resize(out_size);
  c.k.assign(static_cast<size_t>(out_size) * c.ksize, 0);
  std::vector<double> w(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);  // C truncation, as Pillow
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = BicubicFilter((x + xmin - center + 0.5) * ss);
      ww += w[x];
    }
    for (int x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? w[x] / ww : w[x];
      c.k[static_cast<size_t>(xx) * c.ksize + x] =
          static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    c.xmin[xx] = xmin;
    c.count[xx] = xmax;
  }
  return c;
}

uint8_t Clip8(int32_t v) {
  const int32_t s = v >> kPrecisionBits;  // arithmetic shift, as Pillow's clip8
  return static_cast<uint8_t>(s < 0 ? 0 : s > 255 ? 255 : s);
}

// Horizontal pass over source rows [y0, y0 + rows).
RgbImage ResampleHorizontal(const RgbImage& in, int out_w, int y0, int rows, const Coeffs& c) {
  RgbImage out;
  out.width = out_w;
  out.height = rows;
  out.rgb.resize(static_cast<size_t>(out_w) * rows * 3);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* src = in.rgb.data() + static_cast<size_t>(y0 + y) * in.width * 3;
    uint8_t* dst = out.rgb.data() + static_cast<size_t>(y) * out_w * 3;
    for (int xx = 0; xx < out_w; ++xx) {
      const int32_t* k = &c.k[static_cast<size_t>(xx) * c.ksize];
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      const uint8_t* p = src + static_cast<size_t>(c.xmin[xx]) * 3;
      for (int x = 0; x < c.count[xx]; ++x) {
        s0 += p[3 * x] * k[x];
        s1 += p[3 * x + 1] * k[x];
        s2 += p[3 * x + 2] * k[x];
      }
      dst[3 * xx] = Clip8(s0);
      dst[3 * xx + 1] = Clip8(s1);
      dst[3 * xx + 2] = Clip8(s2);
    }
  }
  return out;
}

// Vertical pass; c.xmin are relative to the first row of `in`.
RgbImage ResampleVertical(const RgbImage& in, int out_h, const Coeffs& c, int row_shift) {
  RgbImage out;
  out.width = in.width;
  out.height = out_h;
  out.rgb.resize(static_cast<size_t>(in.width) * out_h * 3);
  const size_t stride = static_cast<size_t>(in.width) * 3;
  for (int yy = 0; yy < out_h; ++yy) {
    const int32_t* k = &c.k[static_cast<size_t>(yy) * c.ksize];
    const int ymin = c.xmin[yy] - row_shift;
    uint8_t* dst = out.rgb.data() + static_cast<size_t>(yy) * stride;
    for (size_t xc = 0; xc < stride; ++xc) {
      int32_t s = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < c.count[yy]; ++y) s += in.rgb[static_cast<size_t>(ymin + y) * stride + xc] * k[y];
      dst[xc] = Clip8(s);
    }
  }
  return out;
}

// Python's round() on a double (half to even).
int64_t PyRound(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

// float -> bf16 -> float, round to nearest even (torch's .to(torch.bfloat16)).
float RoundBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  u &= 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

}  // namespace

StatusOr<RgbImage> ResizeBicubic(const RgbImage& src, int width, int height) {
  if (width < 1 || height < 1) {
    return InvalidArgumentError("cannot resize to " + std::to_string(width) + "x" + std::to_string(height));
  }
  if (src.width < 1 || src.height < 1 || src.rgb.size() != static_cast<size_t>(src.width) * src.height * 3) {
    return InvalidArgumentError("resize of an empty or malformed image");
  }
  if (width == src.width && height == src.height) return src;  // Image.resize returns a copy
  const bool need_h = width != src.width, need_v = height != src.height;
  const Coeffs ch = Precompute(src.width, width);
  const Coeffs cv = Precompute(src.height, height);
  // As ImagingResampleInner: the horizontal pass covers only the rows the vertical one reads.
  const int y_first = cv.xmin[0];
  const int y_last = cv.xmin[height - 1] + cv.count[height - 1];
  if (!need_v) return ResampleHorizontal(src, width, 0, src.height, ch);
  if (!need_h) return ResampleVertical(src, height, cv, 0);
  RgbImage tmp = ResampleHorizontal(src, width, y_first, y_last - y_first, ch);
  return ResampleVertical(tmp, height, cv, y_first);
}

StatusOr<RgbImage> FitToPlan(const RgbImage& src, const ImagePlan& plan) {
  const int W = plan.best_width, H = plan.best_height;
  if (!plan.pad) return ResizeBicubic(src, W, H);
  // ImageOps.contain then pad (Pillow 9.4): the ratios compared as Python floats.
  const double im_ratio = static_cast<double>(src.width) / src.height;
  const double dest_ratio = static_cast<double>(W) / H;
  int64_t w = W, h = H;
  if (im_ratio != dest_ratio) {
    if (im_ratio > dest_ratio) {
      h = PyRound(static_cast<double>(src.height) / src.width * W);
    } else {
      w = PyRound(static_cast<double>(src.width) / src.height * H);
    }
  }
  if (w < 1 || h < 1) return InvalidArgumentError("image is too thin to resize to its planned size");
  DS41_ASSIGN_OR_RETURN(RgbImage fitted, ResizeBicubic(src, static_cast<int>(w), static_cast<int>(h)));
  if (w == W && h == H) return fitted;
  RgbImage out;
  out.width = W;
  out.height = H;
  out.rgb.assign(static_cast<size_t>(W) * H * 3, 127);
  int64_t x0 = 0, y0 = 0;
  if (w != W) {
    x0 = PyRound((W - w) * 0.5);
  } else {
    y0 = PyRound((H - h) * 0.5);
  }
  for (int64_t y = 0; y < h; ++y) {
    const int64_t ty = y + y0;
    if (ty < 0 || ty >= H) continue;  // paste clips (cannot happen for a contained size)
    const int64_t cx0 = std::max<int64_t>(0, x0), cx1 = std::min<int64_t>(W, x0 + w);
    if (cx1 <= cx0) continue;
    std::memcpy(&out.rgb[(ty * W + cx0) * 3], &fitted.rgb[(y * w + (cx0 - x0)) * 3], (cx1 - cx0) * 3);
  }
  return out;
}

StatusOr<std::vector<float>> ImagePatches(const RgbImage& rgb, const ImagePlan& plan, const ImageGeometry& geometry) {
  const int p = geometry.patch_size;
  if (p < 1 || plan.n_vit_w * p != plan.best_width || plan.n_vit_h * p != plan.best_height) {
    return InvalidArgumentError("image plan does not match the geometry's patch size");
  }
  DS41_ASSIGN_OR_RETURN(RgbImage fitted, FitToPlan(rgb, plan));
  return CanvasPatches(fitted, plan.n_vit_h, plan.n_vit_w, p);
}

StatusOr<std::vector<float>> CanvasPatches(const RgbImage& fitted, int n_vit_h, int n_vit_w, int p) {
  if (p < 1 || n_vit_h < 1 || n_vit_w < 1 || fitted.width != n_vit_w * p || fitted.height != n_vit_h * p ||
      fitted.rgb.size() != static_cast<size_t>(fitted.width) * fitted.height * 3) {
    return InvalidArgumentError("the fitted picture is not the patch grid's size");
  }
  // The 256 possible values after (x/255 - 0.5)/0.5 in fp32, then bf16, as the release computes.
  float lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = RoundBf16((static_cast<float>(v) / 255.0f - 0.5f) / 0.5f);
  const size_t patch_len = static_cast<size_t>(3) * p * p;
  std::vector<float> out(static_cast<size_t>(n_vit_h) * n_vit_w * patch_len);
  const int W = fitted.width;
  for (int gy = 0; gy < n_vit_h; ++gy) {
    for (int gx = 0; gx < n_vit_w; ++gx) {
      float* dst = &out[(static_cast<size_t>(gy) * n_vit_w + gx) * patch_len];
      for (int c = 0; c < 3; ++c) {
        for (int py = 0; py < p; ++py) {
          const uint8_t* row = &fitted.rgb[(static_cast<size_t>(gy * p + py) * W + gx * p) * 3];
          for (int px = 0; px < p; ++px) *dst++ = lut[row[px * 3 + c]];
        }
      }
    }
  }
  return out;
}

}  // namespace ds41::image
