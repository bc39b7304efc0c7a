#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ds41::tokenizer {
namespace {

std::vector<std::string> Pieces(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view p : PreTokenize(text)) out.emplace_back(p);
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenizerTest, Empty) { EXPECT_TRUE(PreTokenize("").empty()); }

TEST(PreTokenizerTest, NumbersSplitIntoGroupsOfThree) {
  EXPECT_EQ(Pieces("1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(Pieces("ab12345cd"), (V{"ab", "123", "45", "cd"}));
  // Non-ASCII digits are \p{N} too.
  EXPECT_EQ(Pieces("١٢٣٤"), (V{"١٢٣", "٤"}));
}

TEST(PreTokenizerTest, CjkAndKanaRunsAreIsolated) {
  EXPECT_EQ(Pieces("日本語テキストabc"), (V{"日本語テキスト", "abc"}));
  EXPECT_EQ(Pieces("中文，好"), (V{"中文", "，", "好"}));
}

TEST(PreTokenizerTest, AsciiPunctuationTakesFollowingLetters) {
  EXPECT_EQ(Pieces("foo.Bar"), (V{"foo", ".Bar"}));
  EXPECT_EQ(Pieces("a//b"), (V{"a", "//", "b"}));  // punctuation run wins over "/b"
  EXPECT_EQ(Pieces("don't"), (V{"don", "'t"}));
}

TEST(PreTokenizerTest, OptionalPrefixBeforeLetters) {
  EXPECT_EQ(Pieces("hello world"), (V{"hello", " world"}));
  EXPECT_EQ(Pieces("\tx"), (V{"\tx"}));
  EXPECT_EQ(Pieces("\nx"), (V{"\n", "x"}));  // \r\n never serve as the prefix
}

TEST(PreTokenizerTest, SpaceBeforePunctuationAndTrailingNewlines) {
  EXPECT_EQ(Pieces("a !!\n\nb"), (V{"a", " !!\n\n", "b"}));
}

TEST(PreTokenizerTest, WhitespaceLookaheadGivesBackOneSpace) {
  EXPECT_EQ(Pieces("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(Pieces("a "), (V{"a", " "}));     // run at end of text is kept whole
  EXPECT_EQ(Pieces("a   "), (V{"a", "   "}));
  EXPECT_EQ(Pieces("1 2"), (V{"1", " ", "2"}));  // digits are isolated first, so " " ends a piece
}

TEST(PreTokenizerTest, NewlineRuns) {
  EXPECT_EQ(Pieces("a\n\n\nb"), (V{"a", "\n\n\n", "b"}));
  EXPECT_EQ(Pieces("a \n \n  b"), (V{"a", " \n \n", " ", " b"}));
  EXPECT_EQ(Pieces("x\r\n\r\n"), (V{"x", "\r\n\r\n"}));
}

TEST(PreTokenizerTest, InvalidUtf8IsKeptAndPiecesConcatenateToInput) {
  const std::string text = "ab\xFF\xC0 cd\xE4\xB8";
  std::string joined;
  for (std::string_view p : PreTokenize(text)) {
    EXPECT_FALSE(p.empty());
    joined.append(p);
  }
  EXPECT_EQ(joined, text);
}

}  // namespace
}  // namespace ds41::tokenizer
