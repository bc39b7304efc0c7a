#include "grammar/tool_call_grammar.h"

#include <gtest/gtest.h>

#include "chat/reply_parser.h"
#include "grammar/json_matcher.h"
#include "grammar/json_sample.h"

namespace ds41::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::vector<ToolSpec> Tools() {
  return {
      {"read_file",
       Json::parse(R"({"type": "object", "properties": {"path": {"type": "string", "minLength": 1},
           "lines": {"type": "integer"}}, "required": ["path"]})"),
       false},
      {"run_tests",
       Json::parse(R"({"type": "object", "properties": {"target": {"enum": ["unit", "all"]}, "verbose": {"type": "boolean"},
           "note": {"type": ["string", "null"]}}, "required": ["target", "verbose", "note"], "additionalProperties": false})"),
       true},
      {"noop", Json(), false},
  };
}

bool Matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  JsonMatcher m(g);
  return m.AcceptBytes(text) && m.IsComplete();
}

TEST(ToolCallGrammarTest, TheRenderedFormatIsAccepted) {
  auto g = CompileToolCalls(Tools(), {});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string one =
      "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"read_file\">\n"
      "<｜DSML｜ parameter name=\"path\" string=\"true\">src/<main>.cc\n\"x\"</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"lines\" string=\"false\">40</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  EXPECT_TRUE(Matches(*g, one));
  const std::string two =
      "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"run_tests\">\n"
      "<｜DSML｜ parameter name=\"target\" string=\"true\">all</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"verbose\" string=\"false\">true</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"note\" string=\"false\">null</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n"
      "<｜DSML｜ invoke name=\"noop\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  EXPECT_TRUE(Matches(*g, two));
  EXPECT_FALSE(Matches(*g, "Sure! " + one));  // nothing before the block
  EXPECT_FALSE(Matches(*g, "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"rm\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
  // A strict tool's enum and types hold; its required parameters are all there.
  std::string bad = two;
  bad.replace(bad.find(">all<"), 5, ">some<");
  EXPECT_FALSE(Matches(*g, bad));
  EXPECT_FALSE(Matches(*g, "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"run_tests\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
  // One call only, when parallel calls are off.
  ToolCallOptions single;
  single.parallel = false;
  auto g1 = CompileToolCalls(Tools(), single);
  ASSERT_TRUE(g1.ok());
  EXPECT_TRUE(Matches(*g1, one));
  EXPECT_FALSE(Matches(*g1, two));
}

// tool_choice "auto" with strict tools: free text, and a block after it only if well formed.
TEST(ToolCallGrammarTest, OptionalCallsFollowFreeText) {
  ToolCallOptions o;
  o.optional = true;
  auto g = CompileToolCalls(Tools(), o);
  ASSERT_TRUE(g.ok());
  const std::string block = "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"noop\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  EXPECT_TRUE(Matches(*g, ""));
  EXPECT_TRUE(Matches(*g, "Plain text <b>with tags</b>\n\nand paragraphs."));
  EXPECT_TRUE(Matches(*g, "Let me look." + block));
  EXPECT_TRUE(Matches(*g, block));
  EXPECT_FALSE(Matches(*g, "Let me look.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"rm\">"));  // an unknown tool
  EXPECT_FALSE(Matches(*g, "Let me look." + block + " and more"));                         // nothing after the block
  // The parser opens a block at the tag alone: free text never holds it, a block after it must hold.
  EXPECT_FALSE(Matches(*g, "x<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"rm\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
  EXPECT_TRUE(Matches(*g, "x<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"noop\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
  auto spec = CompileToolCallSpec(ToolCallSpecText(Tools(), o));
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(Matches(*spec, "text only"));
}

TEST(ToolCallGrammarTest, ThinkingReasonsFreelyFirst) {
  ToolCallOptions o;
  o.thinking = true;
  auto g = CompileToolCalls({Tools()[2]}, o);
  ASSERT_TRUE(g.ok());
  const std::string block = "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"noop\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  EXPECT_TRUE(Matches(*g, "I should call noop. <b>why</b>\n</think>" + block));
  EXPECT_FALSE(Matches(*g, block));  // the reasoning ends first
}

// Every sampled reply parses, as the router's reply parser reads it, into calls of the tools
// with arguments that hold their schemas.
TEST(ToolCallGrammarTest, SampledRepliesParseIntoValidCalls) {
  auto g = CompileToolCalls(Tools(), {});
  ASSERT_TRUE(g.ok());
  int calls = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::string reply = SampleDocument(**g, seed);
    ASSERT_TRUE(Matches(*g, reply)) << reply;
    const chat::ParsedReply parsed = chat::ParseReply(reply, /*thinking=*/false);
    ASSERT_EQ(parsed.finish, chat::FinishHint::kToolCalls) << reply;
    EXPECT_EQ(parsed.content, "");
    for (const chat::ToolCall& c : parsed.tool_calls) {
      ++calls;
      const Json args = Json::parse(c.arguments);
      if (c.name == "read_file") {
        EXPECT_TRUE(args["path"].is_string());
        EXPECT_TRUE(!args.contains("lines") || args["lines"].is_number_integer()) << c.arguments;
      } else if (c.name == "run_tests") {
        EXPECT_TRUE(args["target"] == "unit" || args["target"] == "all") << c.arguments;
        EXPECT_TRUE(args["verbose"].is_boolean());
        EXPECT_TRUE(args["note"].is_string() || args["note"].is_null()) << c.arguments;
      } else {
        EXPECT_EQ(c.name, "noop");
        EXPECT_TRUE(args.empty());
      }
    }
  }
  EXPECT_GT(calls, 200);
}

TEST(ToolCallGrammarTest, SpecsRoundTripAndBadToolsAreRefused) {
  const std::string spec = ToolCallSpecText(Tools(), {});
  auto g = CompileToolCallSpec(spec);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->nodes.size(), (*CompileToolCalls(Tools(), {}))->nodes.size());
  EXPECT_FALSE(CompileToolCallSpec("{").ok());
  EXPECT_FALSE(CompileToolCallSpec(R"({"tools": [{"name": 3}]})").ok());
  EXPECT_TRUE(CompileToolCallSpec(R"({"tools": [{"name": "x", "strict": null}], "parallel": "yes"})").ok());
  EXPECT_FALSE(CompileToolCalls({}, {}).ok());
  EXPECT_FALSE(CompileToolCalls({{"a\"b", Json(), false}}, {}).ok());
  auto strict = CompileToolCalls({{"f", Json::parse(R"({"type": "object", "properties": {"s": {"type": "string",
      "pattern": "x"}}, "required": ["s"], "additionalProperties": false})"), true}}, {});
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("tool f parameters"), std::string::npos) << strict.status().message();
  EXPECT_FALSE(CompileToolCalls({{"f", Json::parse(R"({"type": "string"})"), false}}, {}).ok());
}

}  // namespace
}  // namespace ds41::grammar
