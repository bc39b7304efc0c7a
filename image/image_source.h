// Image input from request URLs: data URLs with base64 PNG or JPEG bytes, and the limits every
// image is checked against before it is decoded.
//
// The server never fetches remote URLs (http/https are refused with a message saying so). Pure
// functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace ds41::image {

// Production bounds on one image, checked before any allocation that depends on the input
// (decompression bombs). A 6000x6000 picture is accepted; nothing near that is useful to a
// 1,024-position span.
struct ImageLimits {
  size_t max_encoded_bytes = 16u << 20;  // decoded base64 payload (the PNG/JPEG file)
  int64_t max_pixels = 36'000'000;       // width * height from the file header
  int max_side = 16384;                  // width and height from the file header
};

enum class ImageFormat { kPng, kJpeg };

// Strict RFC 4648 base64 (standard alphabet, '=' padding to a multiple of 4, no whitespace, zero
// pad bits). InvalidArgument on anything else.
StatusOr<std::string> DecodeBase64(std::string_view text);

// The file bytes of a `data:image/png;base64,...` or `data:image/jpeg;base64,...` URL (also
// image/jpg). The payload must start with a PNG or JPEG signature (the declared type only gates
// what is accepted: PIL, like us, reads the bytes). InvalidArgument for other URLs (remote ones
// with "the server does not fetch URLs"), other media types ("unsupported image format"), bad
// base64, or a payload over limits.max_encoded_bytes (checked on the text length, before decoding).
StatusOr<std::string> ParseImageDataUrl(std::string_view url, const ImageLimits& limits);

// The format of file bytes by signature; InvalidArgument when neither PNG nor JPEG.
StatusOr<ImageFormat> SniffImageFormat(std::string_view bytes);

}  // namespace ds41::image
