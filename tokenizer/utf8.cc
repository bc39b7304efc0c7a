#include "tokenizer/utf8.h"

namespace ds41::tokenizer {
namespace {

// Well-formed byte ranges of the second byte, by lead byte (Unicode Table 3-7); later bytes are
// always 0x80..0xBF.
struct LeadInfo {
  uint32_t len;
  uint8_t lo, hi;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};  // Continuation byte or never-valid lead.
}

}  // namespace

Utf8Unit DecodeUtf8At(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  const LeadInfo info = Lead(b0);
  const Utf8Unit bad{kInvalidUnitBase + b0, 1, false};
  if (info.len == 1) return {b0, 1, true};
  if (info.len == 0 || i + info.len > s.size()) return bad;
  const auto b1 = static_cast<uint8_t>(s[i + 1]);
  if (b1 < info.lo || b1 > info.hi) return bad;
  char32_t cp = b0 & (0xFF >> (info.len + 1));
  cp = (cp << 6) | (b1 & 0x3F);
  for (uint32_t k = 2; k < info.len; ++k) {
    const auto bk = static_cast<uint8_t>(s[i + k]);
    if ((bk & 0xC0) != 0x80) return bad;
    cp = (cp << 6) | (bk & 0x3F);
  }
  return {cp, info.len, true};
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t CompleteUtf8Prefix(std::string_view s) {
  // A partial sequence is at most 3 bytes, so only the last 3 lead positions can start one.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t start = n - back;
    const LeadInfo info = Lead(static_cast<uint8_t>(s[start]));
    if (info.len == 0) continue;  // Continuation byte (or invalid): keep looking for the lead.
    if (info.len <= back) return n;  // Sequence starting here is complete (or ASCII).
    // Truncated sequence: hold it only while every byte so far is well-formed.
    if (back >= 2) {
      const auto b1 = static_cast<uint8_t>(s[start + 1]);
      if (b1 < info.lo || b1 > info.hi) return n;
    }
    for (size_t k = 2; k < back; ++k) {
      if ((static_cast<uint8_t>(s[start + k]) & 0xC0) != 0x80) return n;
    }
    return start;
  }
  return n;
}

}  // namespace ds41::tokenizer
