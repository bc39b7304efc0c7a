// PromptPiece: a rendered prompt as alternating control tokens and plain text.
//
// Text pieces are encoded WITHOUT control-token matching, so user-supplied text can never open
// markup; only pieces with control=true become control-token ids.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds41::chat {

struct PromptPiece {
  std::string text;
  bool control = false;
  bool operator==(const PromptPiece&) const = default;
};

// The pieces concatenated, as the release's string-valued encoder would print them.
std::string ToString(const std::vector<PromptPiece>& pieces);

// Appends untrusted text (merged into a trailing text piece; empty text adds nothing).
void AppendText(std::vector<PromptPiece>& pieces, std::string_view text);

// Appends one control token. REQUIRES: `token` is in ControlTokens().
void AppendControl(std::vector<PromptPiece>& pieces, std::string_view token);

// Appends trusted template text (our own constants, never request data), turning every
// occurrence of a control token into a control piece, as the release's tokenizer would.
void AppendTemplate(std::vector<PromptPiece>& pieces, std::string_view text);

}  // namespace ds41::chat
