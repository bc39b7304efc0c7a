// Real cache units of the tiny layout (TinyConfig, 64-token units) with recognisable contents, for
// tests of the store and the nodes around it.
#pragma once

#include <cstdint>
#include <string>

namespace ds41 {

// The encoded unit of `tokens` tokens whose KV bytes are all `fill`.
std::string MakeTinyUnitBytes(int tokens, uint8_t fill);

}  // namespace ds41
