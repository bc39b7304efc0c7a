// BenchPlacement: times the router's real placement call (Placer::Place) for each policy over many
// candidates — 1,000 decoders and 1,000 encoders by default, loads drawn at random, some decoders
// warm, prompts whose prefix chains run to a few hundred units from a set of shared conversations,
// the affinity index filled by earlier Served calls as a running router's is. Also times the
// in-flight step the router runs before it (InflightLoads::Apply). Issue 25's goal: p99 <= 1 ms.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "router/placement.h"
#include "util/status.h"

namespace ds41::sim {

struct BenchPlacementSpec {
  int decoders = 1000, encoders = 1000;
  int units = 300;            // typical prompt length in units (prompts vary from 1/3 to 5/3 of it)
  int unit_tokens = 64;
  int conversations = 200;    // distinct prefixes prompts extend
  int warmup = 5000;          // Served calls before timing (prefix affinity's index)
  int samples = 5000;         // timed calls per policy
  int inflight_nodes = 200;   // nodes the router has work in flight on
  uint64_t seed = 1;
  std::vector<PlacementPolicy> policies;  // empty: all
};

struct BenchPlacementResult {
  PlacementPolicy policy;
  double p50_s = 0, p99_s = 0, max_s = 0;           // Place
  double with_inflight_p99_s = 0;                   // Apply + Place
};

StatusOr<std::vector<BenchPlacementResult>> BenchPlacement(const BenchPlacementSpec& spec, std::ostream& os);

}  // namespace ds41::sim
