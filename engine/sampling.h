// Token sampling from fp32 logits: greedy (argmax, ties to the lower id) at temperature 0, else
// temperature + nucleus (top_p) sampling from a seeded generator, deterministic for a given seed.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/status.h"
#include "util/token_logprob.h"

namespace ds41 {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;        // (0, 1]
  uint64_t seed = 0;

  Status Validate() const;
};

// OpenAI's logit adjustments, applied to a row of logits before temperature and top_p:
// logit[j] += bias[j] - frequency_penalty * c[j] - presence_penalty * (c[j] > 0), where c[j] counts
// token j among the tokens this reply has generated so far (the prompt is not counted).
struct LogitAdjustments {
  float frequency_penalty = 0.0f;                   // [-2, 2]
  float presence_penalty = 0.0f;                    // [-2, 2]
  std::vector<std::pair<int32_t, float>> bias;      // (id, added logit in [-100, 100]); ids distinct

  bool empty() const { return frequency_penalty == 0.0f && presence_penalty == 0.0f && bias.empty(); }
  Status Validate(int vocab_size) const;
};

// What a sequence does to its logits before temperature and top_p (penalties, bias, a grammar's
// mask): Shape adjusts the row the next token is drawn from, Emitted learns the token chosen. The
// speculator calls both for every verified row, in order. Thread-compatible: one per sequence.
class LogitShaper {
 public:
  virtual ~LogitShaper() = default;
  virtual void Shape(float* logits, int n) = 0;
  virtual void Emitted(int32_t token) = 0;
};

// One reply's adjustments and the counts they need. Thread-compatible: one per sequence.
class LogitProcessor {
 public:
  LogitProcessor() = default;
  explicit LogitProcessor(LogitAdjustments adjustments) : adj_(std::move(adjustments)) {}

  bool active() const { return !adj_.empty(); }
  // Adjusts `logits` [n] in place for the tokens counted so far.
  void Apply(float* logits, int n) const;
  // A token of the reply (sampled, or resumed after a migration): counted for the penalties.
  void Count(int32_t token);

 private:
  LogitAdjustments adj_;
  std::unordered_map<int32_t, int32_t> counts_;  // only penalties read it
};

// The log-probabilities of a generated token under softmax(logits) (temperature 1, no top_p: the
// adjusted logits the sampler starts from), with the `top` most likely ids (decreasing, ties to
// the lower id; ids a mask set to -inf are left out). REQUIRES: 0 <= token < n, 0 <= top.
TokenLogprob LogprobsOf(const float* logits, int n, int32_t token, int top);

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
