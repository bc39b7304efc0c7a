// The token masker of a model's tokenizer: every id's bytes; control tokens never admitted by a
// grammar but the DSML marker and the end of thinking (tool-call grammars write them); ids past the
// tokenizer's never admitted; the end of sentence once a document is complete.
#pragma once

#include <memory>

#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace ds41::grammar {

std::unique_ptr<TokenMasker> MaskerForTokenizer(const Tokenizer& tokenizer, int32_t model_vocab_size);

}  // namespace ds41::grammar
