// Real cache units of the tiny layout (TinyConfig, 64-token units) with recognisable contents, for
// tests of the store, the cache service and the nodes around them.
#pragma once

#include <cstdint>
#include <string>

#include "unit/unit_format.h"

namespace ds41::testing {

// The unit layout of the tiny config with 64-token units, which every test unit has.
const UnitLayout& TestLayout();

// A unit of `tokens` tokens from position `first`, made by model `fingerprint` (64 hex characters),
// filled from `seed`.
std::string TestUnitBytes(const std::string& fingerprint, int64_t first, int tokens, uint32_t seed);

}  // namespace ds41::testing
