// The data path's framing: round trips, and every malformed shape refused by the parsers.
#include "cache_data/wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace ds41::wire {
namespace {

const std::string kId(32, 'n'), kFp(64, 'f'), kKey(32, 'k'), kParent(32, 'p');

std::array<uint8_t, kHeaderBytes> Head(const std::string& frame) {
  std::array<uint8_t, kHeaderBytes> h{};
  std::memcpy(h.data(), frame.data(), kHeaderBytes);
  return h;
}

TEST(WireTest, PutRoundTrip) {
  const std::string unit = "unit-bytes";
  const std::string frame = EncodePutPrefix(7, {kId, kFp, 3}, kKey, kParent, unit.size()) + unit;
  auto h = ParseHeader(Head(frame), /*requests=*/true, 16);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->op, Op::kPut);
  EXPECT_EQ(h->id, 7u);
  ASSERT_EQ(h->body_length, frame.size() - kHeaderBytes);
  auto p = ParsePut(std::string_view(frame).substr(kHeaderBytes));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ns.id, kId);
  EXPECT_EQ(p->ns.model_fingerprint, kFp);
  EXPECT_EQ(p->ns.format_version, 3);
  EXPECT_EQ(p->key, kKey);
  EXPECT_EQ(p->parent, kParent);
  EXPECT_EQ(p->unit, unit);
  // A full unit: no parent.
  const std::string full = EncodePutPrefix(1, {kId, kFp, 3}, kKey, "", 0);
  EXPECT_TRUE(ParsePut(std::string_view(full).substr(kHeaderBytes))->parent.empty());
}

// Found by fuzz/cache_wire_fuzzer.cc (regression input in fuzz/corpus/cache_wire): a PUT without a
// parent whose parent field held bytes parsed as if they were zeros.
TEST(WireTest, PutWithoutParentMustCarryZerosThere) {
  std::string frame = EncodePutPrefix(1, {kId, kFp, 3}, kKey, "", 0);
  const size_t parent_at = kHeaderBytes + kNamespaceBytes + kKeyBytes + 1;
  ASSERT_TRUE(ParsePut(std::string_view(frame).substr(kHeaderBytes)).ok());
  frame[parent_at + 31] = 'D';
  EXPECT_EQ(ParsePut(std::string_view(frame).substr(kHeaderBytes)).status().code(), StatusCode::kInvalidArgument);
}

TEST(WireTest, GetUnitAndErrorRoundTrip) {
  const std::string keys = kKey + kParent;
  const std::string get = EncodeGet(9, {kId, kFp, 3}, keys);
  auto g = ParseGet(std::string_view(get).substr(kHeaderBytes), 16);
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->count(), 2u);
  EXPECT_EQ(g->key(1), kParent);
  EXPECT_FALSE(ParseGet(std::string_view(get).substr(kHeaderBytes), 1).ok());  // over the key bound
  EXPECT_FALSE(ParseGet(std::string_view(get).substr(kHeaderBytes, get.size() - kHeaderBytes - 1), 16).ok());

  const std::string unit = EncodeUnitPrefix(9, kKey, UnitResult::kFound, 3) + "abc";
  auto u = ParseUnit(std::string_view(unit).substr(kHeaderBytes));
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->result, UnitResult::kFound);
  EXPECT_EQ(u->bytes, "abc");
  EXPECT_FALSE(ParseUnit(std::string(32, 'k') + "\x05").ok());

  const std::string err = EncodeError(4, InvalidArgumentError("nope"), true);
  auto eh = ParseHeader(Head(err), /*requests=*/false, 16);
  ASSERT_TRUE(eh.ok());
  EXPECT_EQ(eh->flags, kFlagFatal);
  const Status st = ParseError(std::string_view(err).substr(kHeaderBytes));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "nope");
}

TEST(WireTest, EveryErrorCodeRoundTripsThroughAnErrorFrame) {
  for (int i = 1; i <= static_cast<int>(StatusCode::kUnauthenticated); ++i) {
    const Status s(static_cast<StatusCode>(i), "why " + std::to_string(i));
    SCOPED_TRACE(s.ToString());
    const std::string frame = EncodeError(3, s, false);
    auto h = ParseHeader(Head(frame), /*requests=*/false, 16);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_EQ(h->body_length, frame.size() - kHeaderBytes);
    EXPECT_EQ(static_cast<uint8_t>(frame[kHeaderBytes]), i);  // the code's own number, as documented
    const Status back = ParseError(std::string_view(frame).substr(kHeaderBytes));
    EXPECT_EQ(back.code(), s.code());
    EXPECT_EQ(back.message(), s.message());
  }
}

TEST(WireTest, ACodeNumberNoErrorHasDecodesAsUnknown) {
  for (uint32_t n : {0u, 17u, 255u, 0xFFFFFFFFu}) {
    std::string body(4, '\0');
    std::memcpy(body.data(), &n, 4);  // little-endian hosts only, as the parsers' tests assume
    body += "from a newer peer";
    const Status s = ParseError(body);
    EXPECT_EQ(s.code(), StatusCode::kUnknown) << n;
    EXPECT_NE(s.message().find("status code " + std::to_string(n)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("from a newer peer"), std::string::npos) << s.message();
  }
  // A code outside the enum (a bad cast) is sent as UNKNOWN, never as its raw number.
  const std::string frame = EncodeError(1, Status(static_cast<StatusCode>(40), "x"), false);
  EXPECT_EQ(ParseError(std::string_view(frame).substr(kHeaderBytes)).code(), StatusCode::kUnknown);
  EXPECT_EQ(static_cast<uint8_t>(frame[kHeaderBytes]), static_cast<uint8_t>(StatusCode::kUnknown));
}

TEST(WireTest, HeadersAreCheckedBeforeAnyBodyIsTrusted) {
  const std::string good = EncodePutPrefix(1, {kId, kFp, 3}, kKey, "", 10);
  EXPECT_TRUE(ParseHeader(Head(good), true, 16).ok());
  EXPECT_FALSE(ParseHeader(Head(good), false, 16).ok());  // a request where a response belongs
  auto edit = [&](size_t at, uint8_t v) {
    std::string f = good;
    f[at] = static_cast<char>(v);
    return ParseHeader(Head(f), true, 16).ok();
  };
  EXPECT_FALSE(edit(0, 'X'));     // magic
  EXPECT_FALSE(edit(4, 2));       // version
  EXPECT_FALSE(edit(5, 0x42));    // opcode
  EXPECT_FALSE(edit(6, 1));       // fatal flag on a request
  EXPECT_FALSE(edit(7, 1));       // reserved
  EXPECT_FALSE(edit(15, 0xFF));   // body length far over the bound
  EXPECT_FALSE(ParseHeader(Head(EncodeHeader(Op::kGet, 1, 98 + 4 + 17 * 32)), true, 16).ok());
}

// Random bodies (and their prefixes of valid shape): whatever parses points inside the input, with
// the sizes its format gives (out-of-bounds reads themselves are for the sanitizer builds).
TEST(WireTest, RandomBytesNeverParseOutOfBounds) {
  std::mt19937 rng(42);
  auto inside = [](std::string_view part, const std::string& b) {
    return part.empty() || (part.data() >= b.data() && part.data() + part.size() <= b.data() + b.size());
  };
  int parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string b(rng() % 300, '\0');
    for (char& c : b) c = static_cast<char>(rng());
    if (i % 4 == 0) {  // a GET whose count matches its length now and then, so that parses succeed
      const uint32_t n = static_cast<uint32_t>(rng() % 17);
      b.resize(102 + n * kKeyBytes);  // namespace (98 bytes), count, keys
      std::memcpy(&b[98], &n, 4);
    }
    if (b.size() >= kHeaderBytes) ParseHeader(Head(b), (i & 1) != 0, 16).status().IgnoreError();
    if (auto p = ParsePut(b); p.ok()) {
      ++parsed;
      EXPECT_EQ(p->key.size(), kKeyBytes);
      EXPECT_TRUE(p->parent.empty() || p->parent.size() == kKeyBytes);
      EXPECT_TRUE(inside(p->key, b) && inside(p->parent, b) && inside(p->unit, b));
    }
    if (auto g = ParseGet(b, 16); g.ok()) {
      ++parsed;
      EXPECT_EQ(g->keys.size() % kKeyBytes, 0u);
      EXPECT_LE(g->count(), 16u);
      EXPECT_TRUE(inside(g->keys, b));
    }
    if (auto u = ParseUnit(b); u.ok()) {
      ++parsed;
      EXPECT_EQ(u->key.size(), kKeyBytes);
      EXPECT_TRUE(inside(u->key, b) && inside(u->bytes, b));
    }
    ParseError(b).IgnoreError();
  }
  EXPECT_GT(parsed, 0) << "no random body parsed: the invariants above were never checked";
}

}  // namespace
}  // namespace ds41::wire
