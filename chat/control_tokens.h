// The control tokens of the DeepSeek-V4.1 vocabulary, in id order (begin-of-sentence is id 0).
//
// The tokenizer's trainer reserves these ids; the prompt renderer emits them as PromptPiece
// {control=true}. Only the strings here may ever be encoded as control tokens.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace ds41::chat {

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kPad = "<｜▁pad▁｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kSystem = "<｜System｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
// The DSML marker alone: tag names (" calls", " invoke", " parameter") are plain text around it.
inline constexpr std::string_view kDsml = "｜DSML｜";
inline constexpr std::string_view kImage = "<｜deepseek_image｜>";

// All control tokens; index == token id.
std::span<const std::string_view> ControlTokens();

// The id of `text` when it is exactly one control token.
std::optional<int> ControlTokenId(std::string_view text);

}  // namespace ds41::chat
