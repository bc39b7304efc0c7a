// Lenient UTF-8 scanning for the tokenizer: any byte string is accepted, and a byte that does not
// start a well-formed sequence (overlong, surrogate, > U+10FFFF, truncated) is a unit of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds41::tokenizer {

// One decoded unit. For an ill-formed byte, `valid` is false, `len` is 1 and `cp` is
// kInvalidUnitBase + the byte, which lies outside Unicode so it belongs to no character class.
struct Utf8Unit {
  char32_t cp;
  uint32_t len;
  bool valid;
};

inline constexpr char32_t kInvalidUnitBase = 0x110000;

// REQUIRES: i < s.size().
Utf8Unit DecodeUtf8At(std::string_view s, size_t i);

// Appends the UTF-8 encoding of a Unicode scalar value.
void AppendUtf8(char32_t cp, std::string* out);

// Length of the longest prefix of `s` that does not end inside a sequence which could still be
// completed by more bytes: everything before a trailing, well-formed-so-far partial sequence.
size_t CompleteUtf8Prefix(std::string_view s);

}  // namespace ds41::tokenizer
