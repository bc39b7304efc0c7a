// Prompts for the cache tests and the chain of units a prompt produces (the unit bytes themselves:
// tests/support/test_units.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache_client/cache_client.h"
#include "tests/support/test_units.h"

namespace ds41::testing {

// n deterministic token ids.
std::vector<int32_t> TestTokens(int n, int seed);
// The units of a prompt (64-token units): its full units and, when it does not end on a boundary, its tail.
std::vector<UnitPut> TestPromptUnits(const CacheNamespace& ns, const std::vector<int32_t>& tokens, int seed);

}  // namespace ds41::testing
