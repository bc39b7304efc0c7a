#include "grammar/grammar_cache.h"

#include <gtest/gtest.h>

#include "grammar/json_matcher.h"

namespace ds41::grammar {
namespace {

TEST(GrammarCacheTest, CompilesOnceAndEvictsTheLeastRecentlyUsed) {
  GrammarCache cache(2);
  auto a = cache.Get(R"({"type": "string"})");
  ASSERT_TRUE(a.ok());
  auto again = cache.Get(R"({"type": "string"})");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(a->get(), again->get());  // the same compiled grammar
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.misses(), 1);
  ASSERT_TRUE(cache.Get(R"({"type": "number"})").ok());
  ASSERT_TRUE(cache.Get(R"({"type": "string"})").ok());   // now the most recent
  ASSERT_TRUE(cache.Get(R"({"type": "boolean"})").ok());  // evicts number
  EXPECT_EQ(cache.misses(), 3);
  ASSERT_TRUE(cache.Get(R"({"type": "string"})").ok());
  EXPECT_EQ(cache.misses(), 3);
  ASSERT_TRUE(cache.Get(R"({"type": "number"})").ok());
  EXPECT_EQ(cache.misses(), 4);
}

TEST(GrammarCacheTest, BadSchemasAreRefusedAndEmptyMeansAnyObject) {
  GrammarCache cache;
  EXPECT_EQ(cache.Get("{not json").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Get(R"({"type": "string", "pattern": "a"})").status().code(), StatusCode::kInvalidArgument);
  auto any = cache.Get("");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->get(), JsonObjectGrammar().get());
}

// Thinking mode: any reasoning up to "</think>", then the document and nothing else; cached apart
// from the same schema without reasoning.
TEST(GrammarCacheTest, ReasoningFirstLeavesTheReasoningFreeAndHoldsTheDocument) {
  GrammarCache cache;
  const std::string schema = R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})";
  auto plain = cache.Get(schema);
  auto reasoned = cache.Get(schema, /*reasoning_first=*/true);
  ASSERT_TRUE(plain.ok() && reasoned.ok());
  EXPECT_NE(plain->get(), reasoned->get());
  EXPECT_EQ(cache.misses(), 2);
  auto accepts = [](const std::shared_ptr<const Grammar>& g, std::string_view text) {
    JsonMatcher m(g);
    return m.AcceptBytes(text) && m.IsComplete();
  };
  EXPECT_TRUE(accepts(*reasoned, R"(Any {"ok": 1} text, even <think>.</think>{"ok":true})"));
  EXPECT_TRUE(accepts(*reasoned, R"(</think>{"ok":false})"));
  EXPECT_FALSE(accepts(*reasoned, R"({"ok":true})"));                  // the reasoning must end first
  EXPECT_FALSE(accepts(*reasoned, R"(x</think>{"ok":true} and more)"));  // nothing after the document
  EXPECT_FALSE(accepts(*reasoned, R"(x</think>{"ok":"yes"})"));
  EXPECT_TRUE(accepts(*plain, R"({"ok":true})"));
  auto any_object = cache.Get("", /*reasoning_first=*/true);
  ASSERT_TRUE(any_object.ok());
  EXPECT_TRUE(accepts(*any_object, R"(hm</think>{"a":[1,"b"]})"));
  EXPECT_FALSE(accepts(*any_object, R"(hm</think>[1])"));
}

}  // namespace
}  // namespace ds41::grammar
