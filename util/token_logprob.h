// A generated token's log-probability and the most likely ids' beside it: what the engine's sampler
// computes (engine/sampling.h LogprobsOf) and the node protocol carries to the router. A plain value.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ds41 {

struct TokenLogprob {
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // (id, logprob), most likely first
};

}  // namespace ds41
