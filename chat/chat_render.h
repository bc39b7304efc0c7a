// Renders an OpenAI-shaped chat request into the DeepSeek-V4.1 DSML prompt, as PromptPieces.
//
// Follows the release's encoding/encoding.py: <｜System｜> prefix with the numeric reasoning effort
// in thinking mode, tool schemas appended to the first system message, tool messages merged into
// the following user turn as <tool_result> blocks (sorted into call order), and reasoning of turns
// before the last user turn dropped unless tools are defined. Malformed input returns
// InvalidArgument naming the offending field.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "chat/prompt_piece.h"
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

// `messages`: the request's messages array. `tools`: its tools array, or null. Parse the request
// with ordered_json: tool schemas are rendered with their keys in the client's order.
StatusOr<std::vector<PromptPiece>> RenderChat(const nlohmann::ordered_json& messages,
                                              const nlohmann::ordered_json& tools,
                                              const ChatRenderOptions& options);

}  // namespace ds41::chat
