#include "chat/reply_parser.h"

#include <algorithm>
#include <cstdint>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace ds41::chat {
namespace {

const std::string kEos = "<｜end▁of▁sentence｜>";

const std::string kCallsBlock =
    "\n\n<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"weather\">\n"
    "<｜DSML｜ parameter name=\"city\" string=\"true\">São Paulo</｜DSML｜ parameter>\n"
    "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n"
    "<｜DSML｜ invoke name=\"noop\">\n"
    "</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>";

TEST(ParseReply, ThinkingSplitsReasoningAndContent) {
  ParsedReply r = ParseReply("Let me think.</think>The answer is 4." + kEos, true);
  EXPECT_EQ(r.reasoning_content, "Let me think.");
  EXPECT_EQ(r.content, "The answer is 4.");
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.finish, FinishHint::kStop);
}

TEST(ParseReply, ChatModeIsAllContent) {
  ParsedReply r = ParseReply("Hi </think> there", false);
  EXPECT_EQ(r.reasoning_content, "");
  EXPECT_EQ(r.content, "Hi </think> there");
}

TEST(ParseReply, ToolCalls) {
  ParsedReply r = ParseReply("plan</think>Checking." + kCallsBlock + kEos, true);
  EXPECT_EQ(r.reasoning_content, "plan");
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0], (ToolCall{"weather", "{\"city\": \"São Paulo\", \"days\": 3}"}));
  EXPECT_EQ(r.tool_calls[1], (ToolCall{"noop", "{}"}));
  EXPECT_EQ(r.finish, FinishHint::kToolCalls);
}

TEST(ParseReply, BlockAtStartOfReply) {
  ParsedReply r = ParseReply(kCallsBlock.substr(2), false);
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.tool_calls.size(), 2u);
}

TEST(ParseReply, TruncatedReasoning) {
  ParsedReply r = ParseReply("still thinking </thi", true);
  EXPECT_EQ(r.reasoning_content, "still thinking </thi");
  EXPECT_EQ(r.content, "");
  EXPECT_EQ(r.finish, FinishHint::kIncomplete);
}

TEST(ParseReply, TruncatedBlockFallsBackToContent) {
  std::string text = "Sure." + kCallsBlock.substr(0, 60);
  ParsedReply r = ParseReply(text, false);
  EXPECT_EQ(r.content, text);
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.finish, FinishHint::kIncomplete);
}

TEST(ParseReply, MalformedBlockFallsBackToContent) {
  for (std::string bad : {
           std::string("\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"x\" "
                       "string=\"maybe\">1</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>"),
           std::string("\n\n<｜DSML｜ calls>\ngarbage\n</｜DSML｜ calls>"),
           std::string("\n\n<｜DSML｜ calls>\n</｜DSML｜ calls>"),
           std::string("\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"x\" "
                       "string=\"true\">1</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"x\" "
                       "string=\"true\">2</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>"),
       }) {
    ParsedReply r = ParseReply("A" + bad + "B", false);
    EXPECT_EQ(r.content, "A" + bad + "B");
    EXPECT_TRUE(r.tool_calls.empty());
    EXPECT_EQ(r.finish, FinishHint::kStop);
  }
}

TEST(ParseReply, NonJsonFalseValueKeptAsString) {
  ParsedReply r = ParseReply(
      "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"x\" string=\"false\">"
      "not json</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>",
      false);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"x\": \"not json\"}");
}

TEST(ParseReply, TextAfterEosIsIgnored) {
  ParsedReply r = ParseReply("done" + kEos + "junk", false);
  EXPECT_EQ(r.content, "done");
}

// Streams `text` split at every pair of cut points and checks the concatenated deltas equal the
// one-shot parse, and that nothing is emitted that a later chunk could still turn into a tag.
void CheckAllSplits(const std::string& text, bool thinking) {
  const ParsedReply want = ParseReply(text, thinking);
  auto run = [&](const std::vector<size_t>& cuts) {
    ReplyStreamParser p(thinking);
    ParsedReply got;
    size_t prev = 0;
    auto take = [&](const ReplyDelta& d) {
      got.reasoning_content += d.reasoning_delta;
      got.content += d.content_delta;
      got.tool_calls.insert(got.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
    };
    for (size_t c : cuts) {
      take(p.Feed(std::string_view(text).substr(prev, c - prev)));
      prev = c;
    }
    take(p.Feed(std::string_view(text).substr(prev)));
    take(p.Finish());
    EXPECT_EQ(got.reasoning_content, want.reasoning_content) << "cuts at " << cuts[0];
    EXPECT_EQ(got.content, want.content) << "cuts at " << cuts[0];
    EXPECT_EQ(got.tool_calls, want.tool_calls) << "cuts at " << cuts[0];
    EXPECT_EQ(p.finish_hint(), want.finish);
  };
  for (size_t i = 0; i <= text.size(); ++i) run({i});
  // Byte-at-a-time, the harshest split.
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  if (!every.empty()) run(every);
}

TEST(ReplyStreamParser, EverySplitMatchesOneShot) {
  CheckAllSplits("Let me think.</think>The answer is 4." + kEos, true);
  CheckAllSplits("plan</think>Checking." + kCallsBlock + kEos, true);
  CheckAllSplits("Checking.\n\n\n" + kCallsBlock + "\nafter" + kCallsBlock, false);
  CheckAllSplits("Sure." + kCallsBlock.substr(0, 60), false);
  CheckAllSplits("x\n\n<｜DSML｜ callz> not a block\n</think>" + kEos, false);
  CheckAllSplits("truncated reasoning </thi", true);
  CheckAllSplits("A\n\n<｜DSML｜ calls>\ngarbage\n</｜DSML｜ calls>B", false);
  CheckAllSplits("", true);
  // Found by fuzz/reply_parser_fuzzer.cc (regression input in fuzz/corpus/reply_parser): one
  // newline before the block, a chunk ending inside the tag; the newline went out as content while
  // the one-shot parse gave it to the block.
  CheckAllSplits("Checking.\n" + kCallsBlock.substr(2) + "after" + kEos, false);
  CheckAllSplits("Checking.\n\n" + kCallsBlock.substr(2) + kEos, true);
}

// Replies stitched from tag fragments and text by a fixed pseudo-random sequence: no input may
// crash the parser, and chunking must never change the result.
TEST(ReplyStreamParser, StitchedFragmentsNeverDiverge) {
  const std::vector<std::string> parts = {
      "a", "\n", "\n\n", "</think>", "</th", kEos, "<｜DSML｜ calls>", "</｜DSML｜ calls>",
      "<｜DSML｜ invoke name=\"f\">", "</｜DSML｜ invoke>",
      "<｜DSML｜ parameter name=\"k\" string=\"true\">", "<｜DSML｜ parameter name=\"n\" string=\"false\">",
      "</｜DSML｜ parameter>", "7", "\"", "é", "\xE2\x98", "<"};
  uint32_t state = 12345;
  auto next = [&]() {
    state = state * 1103515245u + 12345u;
    return (state >> 16) & 0x7fff;
  };
  for (int round = 0; round < 300; ++round) {
    std::string text;
    int n = 1 + next() % 14;
    for (int i = 0; i < n; ++i) text += parts[next() % parts.size()];
    const bool thinking = next() % 2 == 0;
    const ParsedReply want = ParseReply(text, thinking);
    ReplyStreamParser p(thinking);
    ParsedReply got;
    size_t at = 0;
    while (true) {
      size_t len = std::min<size_t>(text.size() - at, next() % 7);
      ReplyDelta d = p.Feed(std::string_view(text).substr(at, len));
      got.reasoning_content += d.reasoning_delta;
      got.content += d.content_delta;
      got.tool_calls.insert(got.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
      at += len;
      if (at == text.size()) break;
    }
    ReplyDelta d = p.Finish();
    got.reasoning_content += d.reasoning_delta;
    got.content += d.content_delta;
    got.tool_calls.insert(got.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
    EXPECT_EQ(got.reasoning_content, want.reasoning_content) << text;
    EXPECT_EQ(got.content, want.content) << text;
    EXPECT_EQ(got.tool_calls, want.tool_calls) << text;
    for (const ToolCall& c : want.tool_calls) {
      EXPECT_TRUE(nlohmann::json::accept(c.arguments)) << c.arguments;
    }
  }
}

TEST(ReplyStreamParser, EmitsEarlyAndHoldsOnlyPartialTags) {
  ReplyStreamParser p(true);
  EXPECT_EQ(p.Feed("abc</th").reasoning_delta, "abc");
  ReplyDelta d = p.Feed("ink>Hello\n");
  EXPECT_EQ(d.reasoning_delta, "");
  EXPECT_EQ(d.content_delta, "Hello");  // "\n" may start the blank line before a calls block
  d = p.Feed("\n<｜DSML｜ ca");
  EXPECT_TRUE(d.empty());
  d = p.Feed("ts> no block");
  EXPECT_EQ(d.content_delta, "\n\n<｜DSML｜ cats> no block");
  // A split UTF-8 character is held until complete.
  std::string snow = "☃";
  d = p.Feed(snow.substr(0, 1));
  EXPECT_TRUE(d.empty());
  d = p.Feed(snow.substr(1));
  EXPECT_EQ(d.content_delta, snow);
  d = p.Feed(kCallsBlock);
  EXPECT_EQ(d.tool_calls.size(), 2u);
  EXPECT_TRUE(p.Finish().empty());
  EXPECT_EQ(p.finish_hint(), FinishHint::kToolCalls);
}

}  // namespace
}  // namespace ds41::chat


namespace ds41::chat {
namespace {

// tool_choice "none": the block the model wrote stays in the content, whole, streamed or not.
TEST(ReplyStreamParserTest, WithoutToolCallsABlockIsContent) {
  const std::string reply = "Checking." + kCallsBlock + kEos;
  for (size_t step : {size_t{1}, size_t{7}, reply.size()}) {
    ReplyStreamParser p(/*thinking=*/false, /*tool_calls=*/false);
    std::string content;
    for (size_t i = 0; i < reply.size(); i += step) {
      const ReplyDelta d = p.Feed(std::string_view(reply).substr(i, step));
      EXPECT_TRUE(d.tool_calls.empty());
      content += d.content_delta;
    }
    const ReplyDelta f = p.Finish();
    EXPECT_TRUE(f.tool_calls.empty());
    content += f.content_delta;
    EXPECT_EQ(content, "Checking." + kCallsBlock) << "step " << step;
    EXPECT_EQ(p.finish_hint(), FinishHint::kStop);
  }
}

}  // namespace
}  // namespace ds41::chat
