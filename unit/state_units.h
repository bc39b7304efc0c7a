// The bridge between a SequenceState's global KV and cache units (the same bytes: MODEL.md §10.3).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/layers/state.h"
#include "unit/unit_format.h"
#include "unit/unit_key.h"

namespace ds41 {

struct BuiltUnit {
  UnitKey key{};
  std::optional<UnitKey> parent;  // tails only
  int64_t first = 0;
  int tokens = 0;
  std::string bytes;
};

// Units for global KV positions [from, to) of `state`: full units, then a tail when `to` is not on a
// unit boundary. `tokens` holds at least positions [0, to) (for the chained keys). REQUIRES
// from % unit_tokens == 0 and the state's KV to reach `to`; a tail that ends inside a ratio-m group
// carries the open group, which needs the state's KV to end exactly at `to`.
StatusOr<std::vector<BuiltUnit>> BuildUnits(const ModelConfig& config, const UnitLayout& layout, const Fingerprint& model,
                                            const SequenceState& state, const std::vector<int32_t>& tokens,
                                            const UnitKey& root, int64_t from, int64_t to);

// Truncates the state's global KV to units[0]'s first position and appends the units in order
// (contiguous; only the last may be a tail). Sets state->length to the end. The SWA part is left
// alone (restore it, or run an encoder replay, before computing on).
Status ApplyUnits(const UnitLayout& layout, const std::vector<Unit>& units, SequenceState* state);

}  // namespace ds41
