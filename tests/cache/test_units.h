// Cache units for the cache tests: real unit bytes at the tiny config's layout, prompts and the
// chain of units a prompt produces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache_client/cache_client.h"
#include "unit/unit_format.h"

namespace ds41::testing {

// The unit layout of the tiny config with 64-token units, which every test unit has.
const UnitLayout& TestLayout();

// A unit of `tokens` tokens from position `first`, made by model `fingerprint`, filled from `seed`.
std::string TestUnitBytes(const std::string& fingerprint, int64_t first, int tokens, uint32_t seed);
// n deterministic token ids.
std::vector<int32_t> TestTokens(int n, int seed);
// The units of a prompt (64-token units): its full units and, when it does not end on a boundary, its tail.
std::vector<UnitPut> TestPromptUnits(const CacheNamespace& ns, const std::vector<int32_t>& tokens, int seed);

}  // namespace ds41::testing
