// Parses the model's reply (the text generated after a RenderChat prompt) into OpenAI fields.
//
// Thinking mode: text up to "</think>" is reasoning, the rest content. A "<｜DSML｜ calls>" block
// (with the blank line before it) becomes tool calls; a block that is malformed or cut off stays
// in the content verbatim. "<｜end▁of▁sentence｜>" ends the reply. Never fails on any input.
// ReplyStreamParser does the same incrementally; ParseReply is that parser fed all at once, so the
// streamed deltas always concatenate to the one-shot result.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds41::chat {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text; string="false" values parsed as JSON
  bool operator==(const ToolCall&) const = default;
};

enum class FinishHint {
  kStop,        // the reply ended normally
  kToolCalls,   // the reply carried at least one tool call
  kIncomplete,  // the reply ended inside the reasoning or inside an unclosed calls block
};

struct ParsedReply {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
  FinishHint finish = FinishHint::kStop;
};

ParsedReply ParseReply(std::string_view text, bool thinking);

struct ReplyDelta {
  std::string reasoning_delta;
  std::string content_delta;
  std::vector<ToolCall> tool_calls;  // complete calls, in order
  bool empty() const { return reasoning_delta.empty() && content_delta.empty() && tool_calls.empty(); }
};

// Emits text as soon as it cannot be part of a tag, holding back only a possible partial tag (and
// an incomplete UTF-8 sequence); a calls block is held until it closes. Thread-compatible: one per
// stream, fed by one caller at a time.
class ReplyStreamParser {
 public:
  // `tool_calls` false (tool_choice "none"): a calls block is content like any other text.
  explicit ReplyStreamParser(bool thinking, bool tool_calls = true);

  ReplyDelta Feed(std::string_view chunk);
  // Flushes everything held back; call once at the end of the stream.
  ReplyDelta Finish();
  // Meaningful after Finish().
  FinishHint finish_hint() const;

 private:
  enum class Mode { kReasoning, kContent, kBlock, kDone };
  void Drain(ReplyDelta& out, bool final);

  Mode mode_;
  const bool tool_calls_;
  std::string pending_;
  bool any_calls_ = false;
  bool incomplete_ = false;
};

}  // namespace ds41::chat
