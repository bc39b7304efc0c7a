#include "chat/control_tokens.h"

#include <array>

namespace ds41::chat {
namespace {

// Order fixes the ids: the first three are the conventional DeepSeek specials; the rest are the
// tokens the release's encoding/encoding.py emits (roles, thinking, DSML marker, the image
// placeholder and the six internal task tokens).
constexpr std::array<std::string_view, 17> kTokens = {
    kBos,          kEos,          kPad,        kUser,          kAssistant,        kSystem,
    kLatestReminder, kThinkStart, kThinkEnd,   kDsml,          kImage,            "<｜action｜>",
    "<｜query｜>", "<｜authority｜>", "<｜domain｜>", "<｜title｜>", "<｜read_url｜>",
};

}  // namespace

std::span<const std::string_view> ControlTokens() { return kTokens; }

std::optional<int> ControlTokenId(std::string_view text) {
  for (size_t i = 0; i < kTokens.size(); ++i) {
    if (kTokens[i] == text) return static_cast<int>(i);
  }
  return std::nullopt;
}

}  // namespace ds41::chat
