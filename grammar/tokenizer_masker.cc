#include "grammar/tokenizer_masker.h"

#include "chat/control_tokens.h"

namespace ds41::grammar {

std::unique_ptr<TokenMasker> MaskerForTokenizer(const Tokenizer& tokenizer, int32_t model_vocab_size) {
  const int32_t n = std::min(tokenizer.vocab_size(), model_vocab_size);
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<bool> control(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    bytes[static_cast<size_t>(id)] = std::string(tokenizer.TokenBytes(id));
    // Tool-call blocks and the end of reasoning are written with these control tokens (the grammar
    // reads their bytes); no other control token is ever part of a constrained reply.
    const std::string_view text = tokenizer.TokenBytes(id);
    control[static_cast<size_t>(id)] = tokenizer.IsControl(id) && text != chat::kDsml && text != chat::kThinkEnd;
  }
  return std::make_unique<TokenMasker>(bytes, control, model_vocab_size, kEosId);
}

}  // namespace ds41::grammar
