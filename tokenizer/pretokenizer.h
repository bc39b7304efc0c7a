// The DeepSeek-V4.1 pre-tokenizer: three isolating splits applied in sequence,
//   a. \p{N}{1,3}
//   b. [一-龥぀-ゟ゠-ヿ]+
//   c. [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//      ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// where each split keeps both its matches and the gaps between them as pieces and the next split
// runs inside each piece. Matching is hand-written with the regex's leftmost-first, greedy,
// backtracking semantics (verified against Python's `regex` by pretokenize_oracle.py).
#pragma once

#include <string_view>
#include <vector>

namespace ds41::tokenizer {

// Pieces are non-empty views into `text` whose concatenation is exactly `text`. Any byte string
// is accepted: an ill-formed UTF-8 byte is a character of no class.
std::vector<std::string_view> PreTokenize(std::string_view text);

}  // namespace ds41::tokenizer
