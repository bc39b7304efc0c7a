#include "tokenizer/unicode_class.h"

#include <gtest/gtest.h>

namespace ds41::tokenizer {
namespace {

TEST(UnicodeClassTest, SpotChecksAgainstTheUnicodeStandard) {
  EXPECT_EQ(ClassifyCodepoint(U'A'), kClassLetter);
  EXPECT_EQ(ClassifyCodepoint(U'中'), kClassLetter);
  EXPECT_EQ(ClassifyCodepoint(0x0301), kClassMark);   // combining acute
  EXPECT_EQ(ClassifyCodepoint(0x0663), kClassNumber); // Arabic-Indic three
  EXPECT_EQ(ClassifyCodepoint(0x2167), kClassNumber); // Roman numeral eight (Nl)
  EXPECT_EQ(ClassifyCodepoint(U'!'), kClassPunct);
  EXPECT_EQ(ClassifyCodepoint(0x3001), kClassPunct);  // ideographic comma
  EXPECT_EQ(ClassifyCodepoint(U'+'), kClassSymbol);
  EXPECT_EQ(ClassifyCodepoint(0x1F600), kClassSymbol); // emoji
  EXPECT_EQ(ClassifyCodepoint(U' '), kClassSpace);
  EXPECT_EQ(ClassifyCodepoint(0x3000), kClassSpace);
  EXPECT_EQ(ClassifyCodepoint(0x85), kClassSpace);
  EXPECT_EQ(ClassifyCodepoint(0x1C), 0);    // isspace() in Python, but not White_Space
  EXPECT_EQ(ClassifyCodepoint(0x200B), 0);  // zero width space is Cf
  EXPECT_EQ(ClassifyCodepoint(0x0378), 0);  // unassigned
  EXPECT_EQ(ClassifyCodepoint(0xD800), 0);  // surrogate
  EXPECT_EQ(ClassifyCodepoint(0x110000), 0);
  EXPECT_EQ(ClassifyCodepoint(0xFFFFFFFF), 0);
}

}  // namespace
}  // namespace ds41::tokenizer
