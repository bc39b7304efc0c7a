#include "chat/prompt_piece.h"

#include <cassert>

#include "chat/control_tokens.h"

namespace ds41::chat {

std::string ToString(const std::vector<PromptPiece>& pieces) {
  std::string out;
  for (const PromptPiece& p : pieces) out += p.text;
  return out;
}

void AppendText(std::vector<PromptPiece>& pieces, std::string_view text) {
  if (text.empty()) return;
  if (!pieces.empty() && !pieces.back().control) {
    pieces.back().text += text;
  } else {
    pieces.push_back({std::string(text), false});
  }
}

void AppendControl(std::vector<PromptPiece>& pieces, std::string_view token) {
  assert(ControlTokenId(token).has_value());
  pieces.push_back({std::string(token), true});
}

void AppendTemplate(std::vector<PromptPiece>& pieces, std::string_view text) {
  while (!text.empty()) {
    size_t best = std::string_view::npos;
    std::string_view best_token;
    for (std::string_view token : ControlTokens()) {
      size_t at = text.find(token);
      if (at < best) {
        best = at;
        best_token = token;
      }
    }
    if (best == std::string_view::npos) {
      AppendText(pieces, text);
      return;
    }
    AppendText(pieces, text.substr(0, best));
    AppendControl(pieces, best_token);
    text.remove_prefix(best + best_token.size());
  }
}

}  // namespace ds41::chat
