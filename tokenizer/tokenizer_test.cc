#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/test_corpus.h"
#include "tokenizer/utf8.h"

namespace ds41 {
namespace {

constexpr std::string_view kToolBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kThink = "<think>";

const Tokenizer& Tok() {
  static const Tokenizer* t = [] {
    const std::vector<std::string> controls = {std::string(kToolBegin), std::string(kThink)};
    StatusOr<std::string> json = TrainBpe(tokenizer::TestCorpus(), 500, controls);
    EXPECT_TRUE(json.ok()) << json.status().ToString();
    StatusOr<Tokenizer> tok = Tokenizer::FromJson(*json);
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    return new Tokenizer(std::move(*tok));
  }();
  return *t;
}

std::string RoundTrip(std::string_view s, bool allow_control) {
  const std::vector<int32_t> ids = Tok().Encode(s, allow_control);
  return Tok().Decode(ids);
}

TEST(TokenizerTest, SpecialIdsAndVocab) {
  EXPECT_EQ(Tok().IdOf(kBosToken), kBosId);
  EXPECT_EQ(Tok().IdOf(kEosToken), kEosId);
  EXPECT_EQ(Tok().IdOf(kPadToken), kPadId);
  EXPECT_EQ(Tok().IdOf(kToolBegin), 3);
  EXPECT_EQ(Tok().IdOf("Ġthe").has_value(), true);
  EXPECT_FALSE(Tok().IdOf("no such token").has_value());
  EXPECT_EQ(Tok().vocab_size(), 500);
  EXPECT_TRUE(Tok().IsControl(kBosId));
  EXPECT_FALSE(Tok().IsControl(Tok().vocab_size() - 1));
}

// Every Unicode scalar value, in chunks, both with and without control matching.
TEST(TokenizerTest, RoundTripsWholeCodepointRange) {
  constexpr char32_t kChunk = 512;
  for (char32_t start = 0; start < 0x110000; start += kChunk) {
    std::string s;
    for (char32_t cp = start; cp < start + kChunk; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      tokenizer::AppendUtf8(cp, &s);
      if (cp % 7 == 0) s.push_back(' ');  // vary piece boundaries
    }
    ASSERT_EQ(RoundTrip(s, false), s) << "chunk at U+" << std::hex << static_cast<uint32_t>(start);
    ASSERT_EQ(RoundTrip(s, true), s) << "chunk at U+" << std::hex << static_cast<uint32_t>(start);
  }
}

TEST(TokenizerTest, RoundTripsInvalidUtf8) {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
  EXPECT_EQ(RoundTrip(all_bytes, false), all_bytes);
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    ASSERT_EQ(RoundTrip(s, false), s);
    ASSERT_EQ(RoundTrip(s, true), s);
  }
}

TEST(TokenizerTest, ControlTokensOnlyWhenAllowed) {
  const std::string text = "result: " + std::string(kToolBegin) + std::string(kThink) + " " +
                           std::string(kEosToken) + "tail";
  const std::vector<int32_t> allowed = Tok().Encode(text, true);
  EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 3), 1);
  EXPECT_EQ(std::count(allowed.begin(), allowed.end(), 4), 1);
  EXPECT_EQ(std::count(allowed.begin(), allowed.end(), kEosId), 1);
  EXPECT_EQ(Tok().Decode(allowed), text);

  const std::vector<int32_t> plain = Tok().Encode(text, false);
  for (int32_t id : plain) EXPECT_FALSE(Tok().IsControl(id)) << id;
  EXPECT_EQ(Tok().Decode(plain), text);
}

TEST(TokenizerTest, ControlScanPrefersLongestAtLeftmost) {
  // "<think>" is a prefix of nothing else here; a bare "<" followed by it must still match it.
  const std::vector<int32_t> ids = Tok().Encode("<<think>>", true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 4), 1);
  EXPECT_EQ(Tok().Decode(ids), "<<think>>");
}

TEST(TokenizerTest, StreamDecoderHoldsPartialSequences) {
  const std::string text = "日本語 😀 mixed ascii Привет 🎉";
  const std::vector<int32_t> ids = Tok().Encode(text, false);
  StreamDecoder dec(Tok());
  std::string out;
  for (int32_t id : ids) {
    const std::string piece = dec.Feed(id);
    EXPECT_EQ(tokenizer::CompleteUtf8Prefix(piece), piece.size());
    out += piece;
  }
  out += dec.Flush();
  EXPECT_EQ(out, text);
}

TEST(TokenizerTest, StreamDecoderSplitsFourByteCharAcrossIds) {
  // Byte-level ids of the four bytes of U+1F600 fed one at a time.
  const std::string emoji = "\xF0\x9F\x98\x80";
  StreamDecoder dec(Tok());
  std::string out;
  for (char c : emoji) {
    const std::string sym = tokenizer::BytesToSymbols(std::string(1, c));
    const std::optional<int32_t> id = Tok().IdOf(sym);
    ASSERT_TRUE(id.has_value());
    out += dec.Feed(*id);
    if (c != emoji.back()) {
      EXPECT_TRUE(out.empty());
    }
  }
  EXPECT_EQ(out, emoji);
  EXPECT_EQ(dec.Flush(), "");
}

TEST(TokenizerTest, StreamDecoderFlushReplacesDanglingBytes) {
  StreamDecoder dec(Tok());
  const std::optional<int32_t> e4 = Tok().IdOf("ä");  // byte 0xE4 maps to itself
  ASSERT_TRUE(e4.has_value());
  EXPECT_EQ(dec.Feed(*e4), "");
  EXPECT_EQ(dec.Flush(), "\xEF\xBF\xBD");
}

TEST(TokenizerTest, DecodeSkipsUnknownIds) {
  const std::vector<int32_t> ids = {-5, Tok().vocab_size(), 1 << 30};
  EXPECT_EQ(Tok().Decode(ids), "");
}

// Malformed tokenizer.json inputs must give INVALID_ARGUMENT, never a crash.
TEST(TokenizerLoadTest, RejectsMalformedJson) {
  const char* cases[] = {
      "",
      "{",
      "[]",
      "{}",
      R"({"model": 3})",
      R"({"model": {"type": "WordPiece", "vocab": {}, "merges": []}})",
      R"({"model": {"type": "BPE", "merges": []}})",
      R"({"model": {"type": "BPE", "vocab": {}, "merges": {}}})",
      R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})",
      R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 99999999999}, "merges": []}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 16000000}, "merges": []}})",  // too sparse
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})",
      R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})",
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",  // lacks byte symbols
      R"({"added_tokens": 5, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
      R"({"added_tokens": [{"id": "x"}], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
  };
  for (const char* c : cases) {
    StatusOr<Tokenizer> t = Tokenizer::FromJson(c);
    ASSERT_FALSE(t.ok()) << c;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << c;
  }
}

// Truncated and byte-mutated versions of a valid file: any outcome but a crash is acceptable, and
// whatever loads must still round-trip text.
TEST(TokenizerLoadTest, SurvivesCorruptedFiles) {
  StatusOr<std::string> json = TrainBpe(tokenizer::TestCorpus(), 300, {});
  ASSERT_TRUE(json.ok());
  std::mt19937 rng(11);
  for (int i = 0; i < 60; ++i) {
    std::string j = json->substr(0, rng() % json->size());
    EXPECT_FALSE(Tokenizer::FromJson(j).ok());
  }
  const std::string probe = "probe text 123 ✓ \xFF";
  for (int i = 0; i < 200; ++i) {
    std::string j = *json;
    for (int k = 0; k < 3; ++k) j[rng() % j.size()] = "0123456789\"{}[],: -aĠ"[rng() % 22];
    StatusOr<Tokenizer> t = Tokenizer::FromJson(j);
    if (t.ok()) {
      EXPECT_EQ(t->Decode(t->Encode(probe, true)), probe);
    }
  }
}

TEST(TokenizerLoadTest, RejectsBadMerges) {
  StatusOr<std::string> json = TrainBpe(tokenizer::TestCorpus(), 300, {});
  ASSERT_TRUE(json.ok());
  auto with_merges = [&](const std::string& merges) {
    std::string j = *json;
    const size_t at = j.find("\"merges\"");
    const size_t open = j.find('[', at);
    // Replace the merges array (balanced brackets) with the given one.
    int depth = 0;
    size_t close = open;
    for (; close < j.size(); ++close) {
      if (j[close] == '[') ++depth;
      if (j[close] == ']' && --depth == 0) break;
    }
    return j.substr(0, open) + merges + j.substr(close + 1);
  };
  EXPECT_TRUE(Tokenizer::FromJson(with_merges("[]")).ok());
  for (const std::string m : {"[\"nospace\"]", "[\"a b c\"]", "[[\"a\"]]", "[3]", "[\"zz qq\"]",
                              "[[\"Ġ\", \"x\"]]"}) {
    StatusOr<Tokenizer> t = Tokenizer::FromJson(with_merges(m));
    EXPECT_FALSE(t.ok()) << m;
  }
}

TEST(TokenizerLoadTest, AcceptsStringMergesAndLoadsFromFile) {
  // A hand-written vocabulary: the 256 byte symbols, "ab", and merges in "a b" form.
  std::string vocab = "{";
  int id = 0;
  for (int b = 0; b < 256; ++b) {
    std::string sym = tokenizer::BytesToSymbols(std::string(1, static_cast<char>(b)));
    std::string esc;
    for (char c : sym) {
      if (c == '"' || c == '\\') esc.push_back('\\');
      esc.push_back(c);
    }
    vocab += "\"" + esc + "\": " + std::to_string(id++) + ",";
  }
  vocab += "\"ab\": 256, \"abc\": 257}";
  const std::string json = R"({"added_tokens": [{"id": 258, "content": "<ctl>", "special": true}],)"
                           R"( "model": {"type": "BPE", "vocab": )" + vocab +
                           R"(, "merges": ["a b", "ab c"]}})";
  const std::string path = ::testing::TempDir() + "/ds41_tok_test.json";
  {
    std::ofstream f(path);
    f << json;
  }
  StatusOr<Tokenizer> t = Tokenizer::Load(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->vocab_size(), 259);
  EXPECT_EQ(t->Encode("abcab<ctl>", true), (std::vector<int32_t>{257, 256, 258}));
  EXPECT_EQ(t->Encode("abc", false), (std::vector<int32_t>{257}));
  std::remove(path.c_str());

  StatusOr<Tokenizer> missing = Tokenizer::Load(path + ".missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ds41
