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

// The distribution SampleToken draws from, [n] summing to 1: one-hot at Argmax at temperature 0,
// else softmax(logits / temperature) over the top_p nucleus.
std::vector<double> TokenProbabilities(const float* logits, int n, const SamplingParams& params);

// The speculative acceptance rule (Leviathan et al. 2023, Chen et al. 2023): a draft token x drawn
// from q is kept with probability min(1, p(x) / q(x)); else the token is drawn from max(0, p - q)
// normalized. Whatever q is, the token returned is distributed as p, so speculation leaves the
// output distribution unchanged; with one-hot p and q (greedy) it keeps x iff x is p's argmax and
// otherwise returns the argmax. `rng` advances by 0 to 2 draws. REQUIRES: p, q distributions over
// the same ids, q(x) > 0.
struct DraftVerdict {
  bool accepted = false;
  int32_t token = 0;  // x when accepted, else the replacement
};
DraftVerdict AcceptDraft(const std::vector<double>& p, const std::vector<double>& q, int32_t x, Rng* rng);

}  // namespace ds41
