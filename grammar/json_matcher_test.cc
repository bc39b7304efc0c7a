#include "grammar/json_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "grammar/json_sample.h"

namespace ds41::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> Compile(const char* schema) {
  auto g = CompileJsonSchema(Json::parse(schema));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return *g;
}

bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  JsonMatcher m(g);
  return m.AcceptBytes(text) && m.IsComplete();
}

const char* kToolSchema = R"({
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "mode": {"enum": ["read", "write"]},
    "count": {"type": "integer"},
    "ratio": {"type": "number"},
    "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
    "ok": {"type": "boolean"},
    "note": {"type": ["string", "null"]}
  },
  "required": ["path", "mode", "count"],
  "additionalProperties": false
})";

TEST(JsonMatcherTest, CompactDocumentsInSchemaOrder) {
  const auto g = Compile(kToolSchema);
  EXPECT_TRUE(Matches(g, R"({"path":"a\"b\u00e9","mode":"read","count":-12})"));
  EXPECT_TRUE(Matches(g, R"({"path":"","mode":"write","count":0,"ratio":1.5e-3,"tags":["a","b"],"ok":true,"note":null})"));
  EXPECT_TRUE(Matches(g, R"({"path":"x","mode":"read","count":7,"ok":false})"));  // optional ones skipped
  EXPECT_FALSE(Matches(g, R"({"path": "x","mode":"read","count":7})"));          // no whitespace
  EXPECT_FALSE(Matches(g, R"({"mode":"read","path":"x","count":7})"));           // schema order
  EXPECT_FALSE(Matches(g, R"({"path":"x","mode":"read"})"));                     // a required one missing
  EXPECT_FALSE(Matches(g, R"({"path":"x","mode":"copy","count":7})"));           // not in the enum
  EXPECT_FALSE(Matches(g, R"({"path":"x","mode":"read","count":7.5})"));         // an integer
  EXPECT_FALSE(Matches(g, R"({"path":"x","mode":"read","count":07})"));          // leading zero
  EXPECT_FALSE(Matches(g, R"({"path":"x","mode":"read","count":7,"extra":1})"));  // no other property
  EXPECT_FALSE(Matches(g, R"({"path":"x","mode":"read","count":7,})"));
  EXPECT_FALSE(Matches(g, "{\"path\":\"a\nb\",\"mode\":\"read\",\"count\":1}"));  // a raw control byte
  EXPECT_FALSE(Matches(g, R"({"path":"\q","mode":"read","count":1})"));          // a bad escape
  EXPECT_FALSE(Matches(g, R"({"path":"x","mode":"read","count":1234567890123456})"));  // over kMaxDigits
  // A prefix is accepted but not complete; nothing follows a complete document.
  JsonMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes(R"({"path":"x","mode":"re)"));
  EXPECT_FALSE(m.IsComplete());
  EXPECT_FALSE(m.Accept('x'));  // refused, and the state is kept
  ASSERT_TRUE(m.AcceptBytes(R"(ad","count":3})"));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_TRUE(m.IsDone());
  EXPECT_FALSE(m.Accept('}'));
}

TEST(JsonMatcherTest, UnicodeEscapesPairTheirSurrogates) {
  const auto g = Compile(R"({"type": "string"})");
  EXPECT_TRUE(Matches(g, R"("\u00e9\ud83d\ude00\uFFFF")"));
  EXPECT_FALSE(Matches(g, R"("\ude00")"));         // a low half alone
  EXPECT_FALSE(Matches(g, R"("\ud83d")"));         // a high half alone
  EXPECT_FALSE(Matches(g, R"("\ud83dx")"));
  EXPECT_FALSE(Matches(g, R"("\ud83d\u0041")"));  // not a low half after it
  EXPECT_FALSE(Matches(g, R"("\u12g4")"));
}

// Strings are UTF-8: whole characters of 1 to 4 bytes; never a stray continuation byte, an
// overlong form, a surrogate, a code point past U+10FFFF or a character cut by the closing quote.
TEST(JsonMatcherTest, StringsHoldWellFormedUtf8Only) {
  const auto g = Compile(R"({"type": "string"})");
  EXPECT_TRUE(Matches(g, "\"caf\xC3\xA9 \xE2\x82\xAC \xED\x9F\xBF \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF\""));
  // Each lead's narrowest legal next byte, and the edges of the ranges.
  EXPECT_TRUE(Matches(g, "\"\xC2\x80\xDF\xBF\xE0\xA0\x80\xEE\x80\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF3\xBF\xBF\xBF\xF4\x80\x80\x80\""));
  for (const char* bad : {"\"\x80\"", "\"\xC3\"", "\"\xC0\x80\"", "\"\xC1\xBF\"", "\"\xE0\x80\x80\"",
                          "\"\xED\xA0\x80\"", "\"\xF0\x80\x80\x80\"", "\"\xF4\x90\x80\x80\"", "\"\xF5\x80\x80\x80\"",
                          "\"\xFF\"", "\"\xE2\x82\"", "\"\xC3\xC3\xA9\""}) {
    EXPECT_FALSE(Matches(g, bad)) << testing::PrintToString(std::string(bad));
  }
  // Mid-character is not free text: the next byte is judged against the lead.
  JsonMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes("\"a\xE2"));
  EXPECT_FALSE(m.InsideFreeString());
  EXPECT_FALSE(m.Accept('b'));
  ASSERT_TRUE(m.AcceptBytes("\x82\xAC"));
  EXPECT_TRUE(m.InsideFreeString());
}

TEST(JsonMatcherTest, NumbersStayFiniteDoubles) {
  const auto g = Compile(R"({"type": "number"})");
  EXPECT_TRUE(Matches(g, "123456789012345.123456789012345e-99"));
  EXPECT_FALSE(Matches(g, "1e100"));  // three exponent digits
  EXPECT_FALSE(Matches(g, "1234567890123456"));
}

TEST(JsonMatcherTest, ATopLevelNumberMayEndOrGoOn) {
  const auto g = Compile(R"({"type": "number"})");
  JsonMatcher m(g);
  ASSERT_TRUE(m.AcceptBytes("12"));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_FALSE(m.IsDone());
  ASSERT_TRUE(m.AcceptBytes(".5e+10"));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_FALSE(m.Accept('.'));
}

TEST(JsonMatcherTest, RecursiveSchemasNestUpToTheLimit) {
  const auto g = Compile(R"({"$ref": "#/$defs/n", "$defs": {"n": {"type": "object",
      "properties": {"c": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}}, "required": ["c"],
      "additionalProperties": false}}})");
  std::string doc = "null";
  for (int i = 0; i < 10; ++i) doc = "{\"c\":" + doc + "}";
  EXPECT_TRUE(Matches(g, doc));
  std::string deep = "null";
  for (int i = 0; i < kMaxNesting + 1; ++i) deep = "{\"c\":" + deep + "}";
  EXPECT_FALSE(Matches(g, deep));
}

// However many choices a schema leaves open, the matcher follows at most kMaxStacks at once: the
// rest are dropped and counted, so one byte's work stays bounded (docs/security.md).
TEST(JsonMatcherTest, OpenChoicesAreBoundedAndTheDroppedCounted) {
  Json wide = {{"anyOf", Json::array()}};
  for (int i = 0; i < kMaxStacks + 904; ++i) wide["anyOf"].push_back({{"const", "k" + std::to_string(10000 + i)}});
  auto g = CompileJsonSchema(wide);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  JsonMatcher m(*g);
  ASSERT_TRUE(m.AcceptBytes("\"k1"));  // every alternative is still open here
  EXPECT_EQ(m.stacks().size(), static_cast<size_t>(kMaxStacks));
  EXPECT_EQ(m.dropped_stacks(), 904);
}

// At the nesting limit the matcher refuses to begin a value rather than accept a key it cannot
// give one: every prefix it accepts can still be completed.
TEST(JsonMatcherTest, NoDeadEndAtTheNestingLimit) {
  const auto g = Compile(R"({"$ref": "#/$defs/n", "$defs": {"n": {"type": "object",
      "properties": {"c": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}, "d": {"type": "array", "items": {"type": "integer"}}},
      "required": ["c"], "additionalProperties": false}}})");
  JsonMatcher m(g);
  int levels = 0;
  while (m.AcceptBytes(R"({"c":)")) ++levels;
  EXPECT_GT(levels, 10);
  EXPECT_LT(levels, kMaxNesting);
  ASSERT_TRUE(m.AcceptBytes("null"));
  // The optional array of the innermost objects: begun only where it fits.
  const bool array = m.AcceptBytes(R"(,"d":[1,2])");
  for (int i = 0; i < levels; ++i) {
    ASSERT_TRUE(m.Accept('}')) << "level " << i << (array ? " (with an array)" : "");
  }
  EXPECT_TRUE(m.IsComplete());
}

TEST(JsonMatcherTest, InsideFreeStringOnlyInAStringsText) {
  const auto g = Compile(kToolSchema);
  JsonMatcher m(g);
  EXPECT_FALSE(m.InsideFreeString());
  ASSERT_TRUE(m.AcceptBytes(R"({"path":"ab)"));
  EXPECT_TRUE(m.InsideFreeString());
  ASSERT_TRUE(m.Accept('\\'));
  EXPECT_FALSE(m.InsideFreeString());
  ASSERT_TRUE(m.AcceptBytes(R"(n","mode":")"));
  EXPECT_FALSE(m.InsideFreeString());  // an enum's literal, not a free string
}

// ---- property tests: random documents of a schema, and random mutations of them ----------------

// The oracle, written apart from the matcher: a recursive-descent parser over the whole text that
// returns every position where a value of `node` starting at `pos` can end.
std::set<size_t> Ends(const Grammar& g, int32_t node, std::string_view t, size_t pos, int depth);

std::set<size_t> StringEnd(std::string_view t, size_t pos) {
  if (pos >= t.size() || t[pos] != '"') return {};
  for (size_t i = pos + 1; i < t.size(); ++i) {
    const auto c = static_cast<uint8_t>(t[i]);
    if (c == '"') return {i + 1};
    if (c < 0x20) return {};
    if (c >= 0x80) {
      // One UTF-8 character, decoded: its length from the lead, continuation bytes 10xxxxxx, and a
      // code point that is not overlong, not a surrogate and not past U+10FFFF.
      const int len = c >= 0xF8 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
      if (len == 0 || i + len > t.size()) return {};
      uint32_t cp = c & (0x7F >> len);
      for (int k = 1; k < len; ++k) {
        const auto cont = static_cast<uint8_t>(t[i + k]);
        if ((cont & 0xC0) != 0x80) return {};
        cp = cp << 6 | (cont & 0x3F);
      }
      const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
      if (cp < least[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return {};
      i += static_cast<size_t>(len) - 1;
      continue;
    }
    if (c == '\\') {
      if (i + 1 >= t.size()) return {};
      const char e = t[i + 1];
      if (e == 'u') {
        // Four hex digits; a high surrogate needs a low one escaped right after; a low one alone is refused.
        auto unit = [&](size_t at) -> long {
          if (at + 4 > t.size()) return -1;
          for (size_t k = at; k < at + 4; ++k)
            if (!isxdigit(static_cast<unsigned char>(t[k]))) return -1;
          return std::stol(std::string(t.substr(at, 4)), nullptr, 16);
        };
        const long u = unit(i + 2);
        if (u < 0 || (u >= 0xDC00 && u <= 0xDFFF)) return {};
        i += 5;
        if (u >= 0xD800 && u <= 0xDBFF) {
          if (t.substr(i + 1, 2) != "\\u") return {};
          const long lo = unit(i + 3);
          if (lo < 0xDC00 || lo > 0xDFFF) return {};
          i += 6;
        }
      } else if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
        ++i;
      } else {
        return {};
      }
    }
  }
  return {};
}

size_t Digits(std::string_view t, size_t pos) {
  size_t i = pos;
  while (i < t.size() && isdigit(static_cast<unsigned char>(t[i]))) ++i;
  return i - pos;
}

// '-'? ('0' | [1-9] digit{0,14}) ('.' digit{1,15})? ([eE] [+-]? digit{1,3})?, every end position.
std::set<size_t> NumberEnds(std::string_view t, size_t pos, bool real) {
  std::set<size_t> ends;
  size_t i = pos;
  if (i < t.size() && t[i] == '-') ++i;
  std::vector<size_t> int_ends;
  if (i < t.size() && t[i] == '0') {
    int_ends = {i + 1};
  } else {
    const size_t d = Digits(t, i);
    for (size_t k = 1; k <= std::min<size_t>(d, kMaxDigits); ++k) int_ends.push_back(i + k);
  }
  ends.insert(int_ends.begin(), int_ends.end());
  if (!real) return ends;
  for (size_t e : int_ends) {
    std::vector<size_t> bases = {e};
    if (e < t.size() && t[e] == '.') {
      const size_t fd = Digits(t, e + 1);
      for (size_t k = 1; k <= std::min<size_t>(fd, kMaxDigits); ++k) {
        bases.push_back(e + 1 + k);
        ends.insert(e + 1 + k);
      }
    }
    for (size_t b : bases) {
      if (b >= t.size() || (t[b] != 'e' && t[b] != 'E')) continue;
      size_t j = b + 1;
      if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
      const size_t ed = Digits(t, j);
      for (size_t k = 1; k <= std::min<size_t>(ed, kMaxExponentDigits); ++k) ends.insert(j + k);
    }
  }
  return ends;
}

std::set<size_t> Ends(const Grammar& g, int32_t node, std::string_view t, size_t pos, int depth) {
  if (depth > kMaxNesting) return {};
  const Node& n = g.nodes[static_cast<size_t>(node)];
  switch (n.kind) {
    case NodeKind::kLiteral:
      return t.substr(pos, n.literal.size()) == n.literal ? std::set<size_t>{pos + n.literal.size()} : std::set<size_t>{};
    case NodeKind::kString: return StringEnd(t, pos);
    case NodeKind::kSequence:
    case NodeKind::kRawUntil:
    case NodeKind::kTextWithout: return {};  // tool-call grammars only (tool_call_grammar_test.cc)
    case NodeKind::kNumber: return NumberEnds(t, pos, true);
    case NodeKind::kInteger: return NumberEnds(t, pos, false);
    case NodeKind::kAnyOf: {
      std::set<size_t> all;
      for (int32_t a : n.alternatives) {
        const std::set<size_t> e = Ends(g, a, t, pos, depth);
        all.insert(e.begin(), e.end());
      }
      return all;
    }
    case NodeKind::kArray: {
      if (pos >= t.size() || t[pos] != '[') return {};
      std::set<size_t> out;
      if (pos + 1 < t.size() && t[pos + 1] == ']') out.insert(pos + 2);
      std::set<size_t> frontier = Ends(g, n.items, t, pos + 1, depth + 1);
      while (!frontier.empty()) {
        std::set<size_t> next;
        for (size_t e : frontier) {
          if (e < t.size() && t[e] == ']') out.insert(e + 1);
          if (e < t.size() && t[e] == ',') {
            const std::set<size_t> more = Ends(g, n.items, t, e + 1, depth + 1);
            next.insert(more.begin(), more.end());
          }
        }
        frontier = std::move(next);
      }
      return out;
    }
    case NodeKind::kFreeObject: {
      if (pos >= t.size() || t[pos] != '{') return {};
      std::set<size_t> out;
      if (pos + 1 < t.size() && t[pos + 1] == '}') out.insert(pos + 2);
      std::set<size_t> frontier = {pos + 1};
      while (!frontier.empty()) {
        std::set<size_t> next;
        for (size_t s : frontier) {
          for (size_t k : StringEnd(t, s)) {
            if (k >= t.size() || t[k] != ':') continue;
            for (size_t e : Ends(g, n.items, t, k + 1, depth + 1)) {
              if (e < t.size() && t[e] == '}') out.insert(e + 1);
              if (e < t.size() && t[e] == ',') next.insert(e + 1);
            }
          }
        }
        frontier = std::move(next);
      }
      return out;
    }
    case NodeKind::kObject: {
      if (pos >= t.size() || t[pos] != '{') return {};
      // (position, next property index, whether a comma is due)
      std::set<std::tuple<size_t, size_t, bool>> frontier = {{pos + 1, 0, false}};
      std::set<size_t> out;
      while (!frontier.empty()) {
        std::set<std::tuple<size_t, size_t, bool>> next;
        for (const auto& [p, from, comma] : frontier) {
          bool rest_optional = true;
          for (size_t j = from; j < n.properties.size(); ++j) rest_optional &= !n.properties[j].required;
          if (rest_optional && p < t.size() && t[p] == '}') out.insert(p + 1);
          size_t q = p;
          if (comma) {
            if (q >= t.size() || t[q] != ',') continue;
            ++q;
          }
          for (size_t j = from; j < n.properties.size(); ++j) {
            const std::string key = "\"" + n.properties[j].key;
            if (t.substr(q, key.size()) == key) {
              for (size_t e : Ends(g, n.properties[j].value, t, q + key.size(), depth + 1)) next.insert({e, j + 1, true});
            }
            if (n.properties[j].required) break;
          }
        }
        frontier = std::move(next);
      }
      return out;
    }
  }
  return {};
}

bool OracleMatches(const Grammar& g, std::string_view t) { return Ends(g, g.root, t, 0, 0).count(t.size()) > 0; }

TEST(JsonMatcherPropertyTest, RandomDocumentsAreAcceptedAndMutationsJudgedAsTheOracleDoes) {
  const char* schemas[] = {
      kToolSchema,
      R"({"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "array", "items": {"type": "integer"}}]}})",
      R"({"$ref": "#/$defs/t", "$defs": {"t": {"type": "object", "properties": {"v": {"type": "integer"},
         "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "required": ["v", "kids"],
         "additionalProperties": false}}})",
      R"({"type": "object"})",
      R"({"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false},
                    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"const": true}}, "additionalProperties": false}]})",
  };
  std::mt19937 rng(2026);
  const std::string noise = "{}[]\",:0123456789.eE+-truefalsenul\\ ax\xC3\xA9\x80\xE2";
  int mutants = 0, valid_mutants = 0;
  for (const char* schema : schemas) {
    SCOPED_TRACE(schema);
    const auto g = Compile(schema);
    for (int round = 0; round < 150; ++round) {
      const std::string doc = SampleDocument(*g, rng());
      ASSERT_TRUE(OracleMatches(*g, doc)) << doc;  // the generator and the oracle agree
      // Accepted byte by byte, complete at the end only if the oracle says so at each prefix end.
      JsonMatcher m(g);
      for (size_t i = 0; i < doc.size(); ++i) {
        ASSERT_TRUE(m.Accept(static_cast<uint8_t>(doc[i]))) << doc << " refused at " << i;
        ASSERT_EQ(m.IsComplete(), OracleMatches(*g, std::string_view(doc).substr(0, i + 1))) << doc.substr(0, i + 1);
      }
      ASSERT_TRUE(m.IsComplete()) << doc;
      // Mutations: an inserted, deleted or replaced byte; the matcher agrees with the oracle.
      for (int k = 0; k < 8; ++k) {
        std::string mut = doc;
        const size_t at = rng() % (mut.size() + 1);
        const char c = noise[rng() % noise.size()];
        switch (rng() % 3) {
          case 0: mut.insert(mut.begin() + static_cast<std::ptrdiff_t>(at), c); break;
          case 1: if (at < mut.size()) mut.erase(at, 1); break;
          default: if (at < mut.size()) mut[at] = c; break;
        }
        const bool want = OracleMatches(*g, mut);
        ++mutants;
        valid_mutants += want;
        EXPECT_EQ(Matches(g, mut), want) << "schema doc " << doc << "\nmutant " << mut;
      }
    }
  }
  // Both outcomes were exercised.
  EXPECT_GT(valid_mutants, 0);
  EXPECT_LT(valid_mutants, mutants / 2);
}

// The grammar means what the schema says: generated documents parse as JSON and hold the schema's
// constraints, checked on the parsed value.
TEST(JsonMatcherPropertyTest, GeneratedDocumentsParseAndHoldTheSchema) {
  const auto g = Compile(kToolSchema);
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const std::string doc = SampleDocument(*g, rng());
    const Json v = Json::parse(doc, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << doc;
    ASSERT_TRUE(v.is_object());
    EXPECT_TRUE(v["path"].is_string());
    EXPECT_TRUE(v["mode"] == "read" || v["mode"] == "write");
    EXPECT_TRUE(v["count"].is_number_integer());
    EXPECT_TRUE(!v.contains("ratio") || v["ratio"].is_number());
    for (const Json& t : v.value("tags", Json::array())) EXPECT_TRUE(t == "a" || t == "b");
    EXPECT_TRUE(!v.contains("ok") || v["ok"].is_boolean());
    EXPECT_TRUE(!v.contains("note") || v["note"].is_string() || v["note"].is_null());
    for (auto it = v.begin(); it != v.end(); ++it) {
      EXPECT_TRUE(std::set<std::string>({"path", "mode", "count", "ratio", "tags", "ok", "note"}).count(it.key()));
    }
  }
}

}  // namespace
}  // namespace ds41::grammar
