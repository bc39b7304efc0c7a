#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace ds41::tokenizer {
namespace {

TEST(Utf8Test, DecodesWellFormedSequences) {
  for (char32_t cp : {0x0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u,
                      0x10FFFFu}) {
    std::string s;
    AppendUtf8(cp, &s);
    const Utf8Unit u = DecodeUtf8At(s, 0);
    EXPECT_TRUE(u.valid) << std::hex << static_cast<uint32_t>(cp);
    EXPECT_EQ(static_cast<uint32_t>(u.cp), static_cast<uint32_t>(cp));
    EXPECT_EQ(u.len, s.size());
  }
}

TEST(Utf8Test, IllFormedBytesAreSingleInvalidUnits) {
  // Overlong, surrogate, beyond U+10FFFF, lone continuation, truncated.
  for (std::string s : {std::string("\xC0\x80"), std::string("\xED\xA0\x80"), std::string("\xF4\x90\x80\x80"),
                        std::string("\x80"), std::string("\xE4\xB8"), std::string("\xFF")}) {
    const Utf8Unit u = DecodeUtf8At(s, 0);
    EXPECT_FALSE(u.valid);
    EXPECT_EQ(u.len, 1u);
    EXPECT_EQ(static_cast<uint32_t>(u.cp), static_cast<uint32_t>(kInvalidUnitBase + static_cast<uint8_t>(s[0])));
  }
}

TEST(Utf8Test, CompletePrefixHoldsOnlyCompletablePartialSequences) {
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4\xB8"), 2u);      // 3-byte sequence missing one byte
  EXPECT_EQ(CompleteUtf8Prefix("ab\xF0\x9F\x98"), 2u);  // 4-byte sequence missing one byte
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE4\xB8\xAD"), 5u);  // complete
  EXPECT_EQ(CompleteUtf8Prefix("ab\xED\xA0"), 4u);      // surrogate prefix can never complete
  EXPECT_EQ(CompleteUtf8Prefix("ab\x80"), 3u);          // lone continuation is emitted
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
}

}  // namespace
}  // namespace ds41::tokenizer
