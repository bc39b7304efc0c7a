#include "grammar/json_grammar.h"

#include <gtest/gtest.h>

namespace ds41::grammar {
namespace {

using Json = nlohmann::ordered_json;

TEST(JsonGrammarTest, CompilesTheStrictSubset) {
  const Json schema = Json::parse(R"({
    "type": "object",
    "title": "a tool call",
    "properties": {
      "path": {"type": "string", "description": "where"},
      "mode": {"enum": ["read", "write", 3, null]},
      "lines": {"type": "array", "items": {"type": "integer"}},
      "flag": {"type": ["boolean", "null"]},
      "pinned": {"const": {"a": [1, 2]}},
      "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}
    },
    "required": ["path", "mode"],
    "additionalProperties": false,
    "$defs": {"node": {"type": "object", "properties": {"child": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                       "required": ["child"], "additionalProperties": false}}
  })");
  auto g = CompileJsonSchema(schema);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Node& root = (*g)->nodes[static_cast<size_t>((*g)->root)];
  ASSERT_EQ(root.kind, NodeKind::kObject);
  ASSERT_EQ(root.properties.size(), 6u);
  EXPECT_EQ(root.properties[0].key, "path\":");
  EXPECT_TRUE(root.properties[0].required);
  EXPECT_TRUE(root.properties[1].required);
  EXPECT_FALSE(root.properties[2].required);
  EXPECT_EQ((*g)->nodes[static_cast<size_t>(root.properties[4].value)].literal, R"({"a":[1,2]})");
}

TEST(JsonGrammarTest, RefusesWhatLiesOutsideTheSubsetNamingWhere) {
  struct Case {
    const char* schema;
    const char* says;
  };
  const Case cases[] = {
      {R"({"type": "string", "pattern": "^a"})", "schema at /: keyword \"pattern\" is outside the supported subset"},
      {R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}})",
       "schema at /properties/n: keyword \"minimum\""},
      {R"({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true})",
       "/additionalProperties: additionalProperties must be false"},
      {R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]})", "/required"},
      {R"({"type": "thing"})", "unknown type \"thing\""},
      {R"({"enum": []})", "enum must be a non-empty array"},
      {R"({"$ref": "#/$defs/missing"})", "does not name a schema"},
      {R"({"$ref": "https://example.com/s.json"})", "does not name a schema"},
      {R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})", "a $ref cycle that consumes nothing"},
      {R"({"items": {"type": "string"}})", "a schema needs a type"},
      {R"(false)", "admits nothing"},
      {R"("string")", "a schema must be an object"},
      {R"({"type": "array", "items": {"oneOf": []}})", "/items: keyword \"oneOf\""},
      {R"({"$ref": "#/$defs/a", "$defs": {"a": {"type": "object", "properties": {"x": {"$ref": "#/$defs/a"}},
          "required": ["x"], "additionalProperties": false}}})", "no finite document"},
  };
  // A chain of $defs stays flat in the JSON: the compiler's own recursion is bounded.
  Json chain = {{"$ref", "#/$defs/a0"}, {"$defs", Json::object()}};
  for (int i = 0; i < 200; ++i) {
    chain["$defs"]["a" + std::to_string(i)] = {{"type", "object"},
                                               {"properties", {{"x", {{"$ref", "#/$defs/a" + std::to_string(i + 1)}}}}},
                                               {"required", {"x"}}};
  }
  chain["$defs"]["a200"] = {{"type", "null"}};
  EXPECT_NE(CompileJsonSchema(chain).status().message().find("nests deeper than 64"), std::string::npos);
  // A grammar is bounded in nodes: 20,001 alternatives are refused, 5,000 compile.
  Json many = {{"anyOf", Json::array()}};
  for (int i = 0; i < kMaxNodes + 1; ++i) many["anyOf"].push_back({{"const", i}});
  EXPECT_NE(CompileJsonSchema(many).status().message().find("the schema is too large"), std::string::npos);
  many["anyOf"].erase(many["anyOf"].begin() + 5000, many["anyOf"].end());
  EXPECT_TRUE(CompileJsonSchema(many).ok());
  Json wide = {{"enum", Json::array()}};
  for (int i = 0; i <= kMaxEnum; ++i) wide["enum"].push_back(i);
  EXPECT_NE(CompileJsonSchema(wide).status().message().find("at most 1000 members"), std::string::npos);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schema);
    auto g = CompileJsonSchema(Json::parse(c.schema));
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(c.says), std::string::npos) << g.status().message();
  }
}

TEST(JsonGrammarTest, AnObjectWithoutPropertiesIsAnyObject) {
  auto g = CompileJsonSchema(Json{{"type", "object"}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->nodes[static_cast<size_t>((*g)->root)].kind, NodeKind::kFreeObject);
  EXPECT_EQ(JsonObjectGrammar()->nodes[static_cast<size_t>(JsonObjectGrammar()->root)].kind, NodeKind::kFreeObject);
}

TEST(JsonGrammarTest, KeysAreEscaped) {
  EXPECT_EQ(JsonEscape("a\"b\\c\n"), "a\\\"b\\\\c\\n");
  EXPECT_EQ(JsonEscape("é"), "é");
}

}  // namespace
}  // namespace ds41::grammar
