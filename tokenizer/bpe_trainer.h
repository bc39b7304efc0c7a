// Deterministic byte-level BPE trainer producing a tokenizer.json that Tokenizer::FromJson loads.
//
// Id layout: 0..2 are kBosToken, kEosToken, kPadToken; the given control tokens follow at 3, 4, ...
// in the order given (so control ids never move when vocab_size changes); then the 256 byte
// symbols in byte order; then one id per learned merge, with merges listed in result-id order.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "util/status.h"

namespace ds41 {

// Texts are pre-tokenized with the release pre-tokenizer (control-token strings in the corpus are
// plain text). Each step merges the most frequent adjacent pair, counted over unique pieces
// weighted by frequency; ties go to the smallest (left id, right id). A pair whose merged string
// equals an existing token or a control token's content (raw or byte-level form) is skipped, so
// every merge makes a new id. Training stops early (smaller vocabulary) when no pair is left.
// INVALID_ARGUMENT if vocab_size < 259 + control tokens, or a control token is empty, duplicated
// or a single byte symbol.
StatusOr<std::string> TrainBpe(std::span<const std::string> corpus, int32_t vocab_size,
                               std::span<const std::string> control_tokens);

}  // namespace ds41
