// Random documents a grammar admits: strings with escapes and multi-byte text, numbers at their
// digit limits, optional properties left out or not, arrays and free objects up to depth 4 (deeper,
// the shortest choices, so recursive schemas end). For property tests and the mask benchmark.
#pragma once

#include <cstdint>
#include <string>

#include "grammar/json_grammar.h"

namespace ds41::grammar {

// Deterministic for a seed.
std::string SampleDocument(const Grammar& g, uint64_t seed);

}  // namespace ds41::grammar
