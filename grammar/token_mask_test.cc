#include "grammar/token_mask.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/json_sample.h"
#include "grammar/tool_call_grammar.h"

namespace ds41::grammar {
namespace {

using Json = nlohmann::ordered_json;

// A byte-level vocabulary: every single byte, some merges (with quotes, digits, keys, escapes), a
// control token and ids past the tokenizer's.
struct Vocab {
  std::vector<std::string> bytes;
  std::vector<bool> control;
  int32_t eos = -1;
  int32_t size = 0;
};

Vocab MakeVocab() {
  Vocab v;
  v.bytes.push_back("<eos>");
  v.control.push_back(true);
  v.eos = 0;
  for (int b = 0; b < 256; ++b) {
    v.bytes.push_back(std::string(1, static_cast<char>(b)));
    v.control.push_back(false);
  }
  for (const char* m : {"{\"", "\":", "\",\"", "\"}", "true", "false", "null", "12", "0.", "e+", "read", "wri", "te\"",
                        "ab", "a\"b", "\\\"", "\\u00", "é", "  ", "}]", "[\"", "\"path\":\"", "count",
                        "\xE2\x82", "\xAC\"", "\xF0\x9F\x98", "\x80" "a", "\xC3\xA9\"", "<think>"}) {
    v.bytes.push_back(m);
    v.control.push_back(std::string(m) == "<think>");
  }
  v.size = static_cast<int32_t>(v.bytes.size()) + 5;  // the model's vocabulary is larger
  return v;
}

// The mask by brute force: each token's bytes fed to a copy of the matcher.
TokenBitmask BruteForce(const JsonMatcher& m, const Vocab& v) {
  TokenBitmask mask((static_cast<size_t>(v.size) + 63) / 64, 0);
  for (int32_t id = 0; id < static_cast<int32_t>(v.bytes.size()); ++id) {
    if (v.control[static_cast<size_t>(id)]) continue;
    JsonMatcher copy = m;
    if (copy.AcceptBytes(v.bytes[static_cast<size_t>(id)])) mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
  }
  if (m.IsComplete()) mask[0] |= 1;  // EOS
  return mask;
}

// Along `doc`, byte by byte from `m`'s state: every mask equals brute force. `m` ends after it.
void ExpectMasksEqualBruteForce(const TokenMasker& masker, const Vocab& v, const std::string& doc, JsonMatcher* m) {
  for (size_t at = 0; at <= doc.size(); ++at) {
    TokenBitmask got;
    masker.Fill(*m, &got);
    ASSERT_EQ(got, BruteForce(*m, v)) << "after " << doc.substr(0, at);
    if (at < doc.size()) {
      ASSERT_TRUE(m->Accept(static_cast<uint8_t>(doc[at])));
    }
  }
}

TEST(TokenMaskerTest, MasksEqualBruteForceAlongDocuments) {
  const Vocab v = MakeVocab();
  const TokenMasker masker(v.bytes, v.control, v.size, v.eos);
  const char* schemas[] = {
      R"({"type": "object", "properties": {"path": {"type": "string"}, "mode": {"enum": ["read", "write"]},
          "count": {"type": "integer"}, "ok": {"type": ["boolean", "null"]}}, "required": ["path", "mode"],
          "additionalProperties": false})",
      R"({"type": "object"})",
      R"({"type": "array", "items": {"type": "number"}})",
  };
  const char* docs[] = {R"({"path":"a\"b\u00e9 x","mode":"write","count":120,"ok":null})",
                        R"({"k":[1,"a\\b",{"x":true}],"z":{}})", "[12,0.5e+3,-7]"};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(docs[i]);
    auto g = CompileJsonSchema(Json::parse(schemas[i]));
    ASSERT_TRUE(g.ok());
    JsonMatcher m(*g);
    const std::string doc = docs[i];
    ExpectMasksEqualBruteForce(masker, v, doc, &m);
    EXPECT_TRUE(MaskHas([&] { TokenBitmask x; masker.Fill(m, &x); return x; }(), v.eos));
  }
}

// Random merges over JSON's alphabet, so tokens end values, open and close strings and escapes,
// and span several values; masks along random documents of several schemas equal brute force.
TEST(TokenMaskerTest, RandomVocabularyMasksEqualBruteForce) {
  Vocab v = MakeVocab();
  std::mt19937 rng(44);
  const std::string alphabet = "{}[]\",:0123456789.eE+-truefalsnul\\ ab\n";
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    for (int k = 1 + static_cast<int>(rng() % 6); k > 0; --k) t += alphabet[rng() % alphabet.size()];
    v.bytes.push_back(t);
    v.control.push_back(false);
  }
  v.size = static_cast<int32_t>(v.bytes.size());
  const TokenMasker masker(v.bytes, v.control, v.size, v.eos);
  const char* schemas[] = {
      R"({"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"},
          "e": {"enum": ["ab", 12]}, "a": {"type": "array", "items": {"type": "number"}}, "z": {"type": ["string", "null"]}},
          "required": ["s", "n"], "additionalProperties": false})",
      R"({"type": "object"})",
      R"({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]}})",
      R"({"type": "number"})",
  };
  for (const char* schema : schemas) {
    SCOPED_TRACE(schema);
    auto g = CompileJsonSchema(Json::parse(schema));
    ASSERT_TRUE(g.ok());
    for (uint64_t seed = 0; seed < 12; ++seed) {
      const std::string doc = SampleDocument(**g, seed);
      JsonMatcher m(*g);
      ExpectMasksEqualBruteForce(masker, v, doc, &m);
    }
  }
}

// Tool-call grammars: raw text up to a terminator is tabled like strings; masks along sampled
// replies equal brute force, with merges that hold DSML tags, the terminator's pieces and quotes.
TEST(TokenMaskerTest, ToolCallMasksEqualBruteForce) {
  Vocab v = MakeVocab();
  std::mt19937 rng(45);
  const std::vector<std::string> pieces = {"<｜DSML｜", " parameter", "</", "｜DSML｜ parameter>", "\n", "\"", ">", "true",
                                           "false", "name=\"", "string=\"", "1", "a", "<", " invoke", " calls>", "\"}"};
  for (int i = 0; i < 2000; ++i) {
    std::string t;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) t += pieces[rng() % pieces.size()];
    v.bytes.push_back(t);
    v.control.push_back(false);
  }
  v.size = static_cast<int32_t>(v.bytes.size());
  const TokenMasker masker(v.bytes, v.control, v.size, v.eos);
  const std::vector<ToolSpec> tools = {
      {"f", Json::parse(R"({"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"},
          "e": {"enum": ["a", 1]}}, "required": ["s", "n"]})"), false},
      {"g", Json(), false}};
  ToolCallOptions optional;
  optional.optional = true;
  auto forced = CompileToolCalls(tools, {});
  auto free_text = CompileToolCalls(tools, optional);
  ASSERT_TRUE(forced.ok() && free_text.ok());
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const auto& g = seed % 2 ? free_text : forced;
    const std::string doc = SampleDocument(**g, seed);
    JsonMatcher m(*g);
    ExpectMasksEqualBruteForce(masker, v, doc, &m);
  }
}

TEST(TokenMaskerTest, ControlTokensAndIdsPastTheTokenizerAreNeverAdmitted) {
  const Vocab v = MakeVocab();
  const TokenMasker masker(v.bytes, v.control, v.size, v.eos);
  auto g = CompileJsonSchema(Json{{"type", "string"}});
  ASSERT_TRUE(g.ok());
  JsonMatcher m(*g);
  ASSERT_TRUE(m.AcceptBytes("\"x"));
  TokenBitmask mask;
  masker.Fill(m, &mask);
  const int32_t think = static_cast<int32_t>(v.bytes.size()) - 1;
  EXPECT_FALSE(MaskHas(mask, think));
  EXPECT_FALSE(MaskHas(mask, v.eos));
  for (int32_t id = static_cast<int32_t>(v.bytes.size()); id < v.size; ++id) EXPECT_FALSE(MaskHas(mask, id));
  EXPECT_TRUE(MaskHas(mask, 1 + 'a'));
  EXPECT_FALSE(MaskHas(mask, 1 + '\n'));  // a raw control byte inside a string
  // Advance: a token's bytes, EOS only when complete.
  EXPECT_FALSE(masker.Advance(&m, v.eos));
  EXPECT_FALSE(masker.Advance(&m, think));
  EXPECT_TRUE(masker.Advance(&m, 1 + '"'));
  EXPECT_TRUE(masker.Advance(&m, v.eos));
}

}  // namespace
}  // namespace ds41::grammar
