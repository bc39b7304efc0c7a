// Trains the small checkpoints' tokenizer: a real byte-level BPE (tokenizer/bpe_trainer.h) over a
// text corpus, with the chat format's control tokens at their release ids.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace ds41 {

// Reads the corpus: files as given, folders recursively (text-like extensions only), in sorted
// order so the same paths always give the same tokenizer. Stops at `max_bytes`.
StatusOr<std::vector<std::string>> ReadCorpus(const std::vector<std::string>& paths, size_t max_bytes);

// Trains and writes <out_dir>/tokenizer.json with `vocab_size` entries.
Status WriteTrainedTokenizer(const std::vector<std::string>& corpus, int32_t vocab_size, const std::string& out_dir);

// The id WriteTrainedTokenizer gives a control token of the chat format (chat/control_tokens.h), or
// -1: the config's image_token_id must name the tokenizer's image token.
int32_t TrainedControlTokenId(std::string_view control);

}  // namespace ds41
