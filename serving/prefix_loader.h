// PrefixLoader: a prompt's cached global KV from the store into a sequence state, as both node roles
// load it (MODEL.md §10.6): the chain of full units of [0, upto), then the tail when `upto` is not on
// a unit boundary. It stops at the first unit missing, corrupt or out of place, so the caller learns
// how far the state reaches and computes the rest.
//
// Thread-safe (the cache client is).
#pragma once

#include <cstdint>
#include <vector>

#include "cache_client/cache_client.h"
#include "engine/layers/state.h"
#include "engine/loading/model.h"
#include "serving/node_metrics.h"

namespace ds41 {

class PrefixLoader {
 public:
  // `cache` and `metrics` may be null (no store: nothing is loaded).
  PrefixLoader(const Model& model, CacheClient* cache, NodeMetrics* metrics);

  // Positions [0, reach) of `tokens` applied to `state` from the store; reach <= upto (0 when nothing
  // could be applied). Counts the bytes and the time as the node's KV transfer in.
  int64_t Load(const UnitKey& ns, const std::vector<int32_t>& tokens, int64_t upto, int unit_tokens,
               SequenceState* state) const;

 private:
  const Model& model_;
  CacheClient* cache_;
  NodeMetrics* metrics_;
};

}  // namespace ds41
