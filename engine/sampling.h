// Token sampling from fp32 logits: greedy (argmax, ties to the lower id) at temperature 0, else
// temperature + nucleus (top_p) sampling from a seeded generator, deterministic for a given seed.
#pragma once

#include <cstdint>
#include <vector>

#include "util/status.h"

namespace ds41 {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // (0, 1]
  uint64_t seed = 0;

  Status Validate() const;
};

// A small, fast, seedable generator (splitmix64 seeding a xoshiro256**). Thread-compatible: one per
// sequence.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  double Uniform();  // [0, 1)

 private:
  uint64_t s_[4];
};

int32_t Argmax(const float* logits, int n);

// Samples one token; `rng` advances by one draw when temperature > 0.
int32_t SampleToken(const float* logits, int n, const SamplingParams& params, Rng* rng);

}  // namespace ds41
