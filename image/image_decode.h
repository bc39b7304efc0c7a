// Decoding PNG and JPEG files to 8-bit RGB the way PIL's Image.open(...).convert("RGB") does.
//
// Gray is replicated, palettes expanded, alpha dropped (not composited), 16-bit RGB(A) and
// gray+alpha keep the high byte and 16-bit gray is clipped to 255 (PIL's I -> RGB), CMYK JPEGs are
// refused. The header is checked against ImageLimits before any pixel buffer is allocated. Every
// failure is a Status; libpng/libjpeg errors never exit or abort. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "image/image_source.h"
#include "util/status.h"

namespace ds41::image {

// Interleaved RGB, row-major, 3 * width * height bytes.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

// Width and height from the file header (no pixel decoding). InvalidArgument for unreadable
// headers, non-PNG/JPEG bytes and sizes over `limits`.
struct ImageHeader {
  ImageFormat format = ImageFormat::kPng;
  int width = 0, height = 0;
};
StatusOr<ImageHeader> ReadImageHeader(std::string_view bytes, const ImageLimits& limits);

// The whole image as RGB8. InvalidArgument for corrupt or truncated files, unsupported color
// spaces and anything over `limits` (checked on the header, before decoding).
StatusOr<RgbImage> DecodeImage(std::string_view bytes, const ImageLimits& limits);

}  // namespace ds41::image
