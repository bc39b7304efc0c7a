#include "grammar/grammar_cache.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ds41::grammar
