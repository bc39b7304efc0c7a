// Renders an OpenAI-shaped chat request into the DeepSeek-V4.1 DSML prompt, as PromptPieces.
//
// Follows the release's encoding/encoding.py: <｜System｜> prefix with the numeric reasoning effort
// in thinking mode, tool schemas appended to the first system message, tool messages merged into
// the following user turn as <tool_result> blocks (sorted into call order), and reasoning of turns
// before the last user turn dropped unless tools are defined. Malformed input returns
// InvalidArgument naming the offending field.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/prompt_piece.h"
#include "util/sha256.h"
#include "util/status.h"

namespace ds41::chat {

inline constexpr int kDefaultReasoningEffort = 75;  // the release's default, "high"

struct ChatRenderOptions {
  bool thinking = true;                          // false: the prompt cues "</think>" (chat mode)
  int reasoning_effort = kDefaultReasoningEffort;  // 1..100; only rendered in thinking mode
  bool drop_thinking = true;                     // drop reasoning of turns before the last user
  bool add_bos = true;
};

// "low" -> 50, "high" -> 75, "max" -> 100, or an integer in [1, 100]; null -> the default.
StatusOr<int> ParseReasoningEffort(const nlohmann::ordered_json& value);

// What a generated reply is recorded under and recognized by when a client sends it back
// (docs/session_reuse.md): SHA-256 of the rendered context before the reply (every piece, its kind
// and bytes) and of the reply's identity: whether its reasoning is rendered, the reasoning, the
// content, and each tool call's name and arguments compared as JSON values (key order, spacing and
// 1 vs 1.0 do not matter; tool-call ids are not rendered and do not count).
using ReplyDigest = std::array<uint8_t, 32>;

// An assistant message that follows a generation cue, where the ids the model generated for it
// belong: pieces [begin, end) are its rendered reasoning, "</think>", content and tool calls (the
// end-of-sentence after them is not part of it).
struct AssistantSpan {
  size_t begin = 0, end = 0;
  ReplyDigest digest{};
};

// What session reuse needs of a rendering: the assistant spans a recorded reply may replace, in
// order, and the whole prompt hashed once, which the digest of the reply it generates continues.
struct ReplySpans {
  std::vector<AssistantSpan> spans;
  Sha256 prompt;            // every piece, its kind and bytes
  std::optional<bool> cue;  // the prompt ends in a generation cue: true "<think>", false "</think>"
};

// An {"type":"image_url","image_url":{"url":...,"detail":...}} part of a user message (or
// "image_url":"..."), in prompt order: the i-th kImage piece is the i-th image.
struct ChatImage {
  std::string url;     // as sent; decoding and validation are the caller's (image/)
  std::string detail;  // as sent ("" when absent); the release ignores it
  std::string field;   // e.g. "messages[0].content[1]", for error messages
};

// `messages`: the request's messages array. `tools`: its tools array, or null. Parse the request
// with ordered_json: tool schemas are rendered with their keys in the client's order. `replies`,
// when given, is filled for session reuse (its prompt hash covers each image's url). `images`,
// when given, receives the image parts in order; without it image parts are refused.
StatusOr<std::vector<PromptPiece>> RenderChat(const nlohmann::ordered_json& messages,
                                              const nlohmann::ordered_json& tools,
                                              const ChatRenderOptions& options, ReplySpans* replies = nullptr,
                                              std::vector<ChatImage>* images = nullptr);

// The digest of a reply generated for a rendered prompt, in the mode of its cue, from the message
// as the client got it ({"role":"assistant", content, reasoning_content, tool_calls}). A later
// request that sends the message back after the same context renders an AssistantSpan with this
// digest. FailedPrecondition when the prompt does not end in a generation cue (a continued
// assistant message is not a reply of its own).
StatusOr<ReplyDigest> GeneratedReplyDigest(const ReplySpans& rendered, const nlohmann::ordered_json& message);

}  // namespace ds41::chat
