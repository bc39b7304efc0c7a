#include "image/image_source.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace ds41::image {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool StartsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && Lower(s.substr(0, prefix.size())) == prefix;
}

constexpr std::array<int8_t, 256> MakeBase64Table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < kAlphabet.size(); ++i) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr std::array<int8_t, 256> kBase64 = MakeBase64Table();

}  // namespace

StatusOr<std::string> DecodeBase64(std::string_view text) {
  if (text.size() % 4 != 0) return InvalidArgumentError("base64 payload length is not a multiple of 4");
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = (text.size() >= 2 && text[text.size() - 2] == '=') ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  const size_t body = text.size() - pad;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < body; ++i) {
    const int8_t v = kBase64[static_cast<unsigned char>(text[i])];
    if (v < 0) return InvalidArgumentError("invalid base64 character at offset " + std::to_string(i));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  // What is left are the pad bits of the last group: 2 (one '=') or 4 (two); they must be zero so
  // that one byte string has one encoding.
  if (bits != (pad == 0 ? 0 : pad == 1 ? 2 : 4) || (acc & ((1u << bits) - 1)) != 0) {
    return InvalidArgumentError("malformed base64 padding");
  }
  return out;
}

StatusOr<ImageFormat> SniffImageFormat(std::string_view bytes) {
  static constexpr std::string_view kPng("\x89PNG\r\n\x1a\n", 8);
  if (bytes.substr(0, kPng.size()) == kPng) return ImageFormat::kPng;
  if (bytes.size() >= 3 && bytes.substr(0, 3) == std::string_view("\xFF\xD8\xFF", 3)) return ImageFormat::kJpeg;
  return InvalidArgumentError("image data is neither PNG nor JPEG");
}

StatusOr<std::string> ParseImageDataUrl(std::string_view url, const ImageLimits& limits) {
  if (StartsWithNoCase(url, "http://") || StartsWithNoCase(url, "https://")) {
    return InvalidArgumentError(
        "remote image URLs are not supported: the server does not fetch URLs; send the image inline "
        "as a data URL (data:image/png;base64,... or data:image/jpeg;base64,...)");
  }
  if (!StartsWithNoCase(url, "data:")) {
    return InvalidArgumentError("image url must be a data URL (data:image/png;base64,... or data:image/jpeg;base64,...)");
  }
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos) return InvalidArgumentError("data URL has no ',' before its payload");
  const std::string header = Lower(url.substr(5, comma - 5));  // mediatype[;param]*[;base64]
  const size_t semi = header.find(';');
  const std::string media = header.substr(0, semi);
  if (media != "image/png" && media != "image/jpeg" && media != "image/jpg") {
    return InvalidArgumentError("unsupported image format \"" + media.substr(0, 64) +
                                "\" (supported: image/png, image/jpeg)");
  }
  if (semi == std::string::npos || header.size() < 7 || header.compare(header.size() - 7, 7, ";base64") != 0) {
    return InvalidArgumentError("data URL must be base64-encoded (\";base64,\")");
  }
  const std::string_view payload = url.substr(comma + 1);
  // Refuse on the text length, before decoding anything: 4 characters per 3 bytes.
  if (payload.size() / 4 * 3 > limits.max_encoded_bytes + 2) {
    return InvalidArgumentError("image is larger than " + std::to_string(limits.max_encoded_bytes) + " bytes");
  }
  DS41_ASSIGN_OR_RETURN(std::string bytes, DecodeBase64(payload));
  if (bytes.size() > limits.max_encoded_bytes) {
    return InvalidArgumentError("image is larger than " + std::to_string(limits.max_encoded_bytes) + " bytes");
  }
  DS41_RETURN_IF_ERROR(SniffImageFormat(bytes).status());
  return bytes;
}

}  // namespace ds41::image
