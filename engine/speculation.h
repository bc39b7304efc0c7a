// Speculative decoding with DSpark (MODEL.md §9.3; paper notes C8): each step drafts a block per
// sequence, picks how many drafted tokens to verify (k) from the confidence head's estimates and the
// engine's measured cost of verifying, verifies them in one batched backbone pass, keeps what the
// acceptance rule accepts (engine/sampling.h: the output distribution is unchanged; greedy output is
// the plain decode's, bit for bit) and rolls the state back over the rest (engine/layers/state.h).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/sampling.h"
#include "util/status.h"

namespace ds41 {

// The cost of one verification step relative to a plain decode step, by batch size: verify[b][k] is
// the time of a pass over k + 1 rows per sequence at batches[b] sequences over that of one row each
// (verify[b][0] == 1), draft[b] the time of the DSpark draft pass over the same.
struct VerifyCostCurve {
  std::vector<int> batches;                 // ascending
  std::vector<std::vector<double>> verify;  // [batches][k = 0..max_k]
  std::vector<double> draft;                // [batches]

  int max_k() const { return verify.empty() ? 0 : static_cast<int>(verify[0].size()) - 1; }
  // Linear in the batch size between measured sizes, the nearest measured one outside them.
  // REQUIRES: non-empty, 0 <= k <= max_k().
  double Verify(int k, int batch) const;
  double Draft(int batch) const;
};

// Times the engine on fresh sequences (a prompt of `prompt` tokens each) at each batch size: plain
// decode, the draft pass and verifications of k = 1..max_k drafted tokens (each rolled back, so all
// run at the same position); the best of `repeats` runs of each, made non-decreasing in k. REQUIRES:
// the model has DSpark layers.
StatusOr<VerifyCostCurve> MeasureVerifyCost(Engine& engine, const Model& model, const std::vector<int>& batches,
                                            int max_k, int prompt, int repeats);

// The confidence head's raw output as the probability that the draft at its position is accepted:
// the logistic function (REF applies no squashing; the head is a binary acceptance classifier).
double AcceptanceEstimate(float confidence);

// Expected tokens from verifying the first k drafts with acceptance estimates a (paper notes C8):
// 1 + sum_{i <= k} prod_{j <= i} a_j (the 1: the token the verifier always produces).
double ExpectedTokens(const std::vector<double>& a, int k);

// The k in [0, max_k] that maximizes the batch's expected tokens per unit cost,
// sum_s ExpectedTokens(accept[s], min(k, accept[s].size())) / curve.Verify(k, batch size); k = 0
// is a plain decode step. The draft pass is not counted: it has run when k is chosen.
int ChooseVerifyLength(const std::vector<std::vector<double>>& accept, const VerifyCostCurve& curve);

// One sequence of a speculative step. The state holds positions [0, length) and `next` is the token
// for position length (sampled, not yet fed); `dspark` has the same positions appended.
struct SpecSequence {
  SequenceState* state = nullptr;
  DsparkState* dspark = nullptr;
  int32_t next = 0;
  SamplingParams sampling;
  Rng* rng = nullptr;
  int max_new = 1;                  // tokens this step may emit (>= 1)
  std::vector<int32_t> stop_ids;    // emitting one of these ends the step's tokens
  // The sequence's shaping (null: none): every target row is shaped before it is sampled or
  // verified against (drafts are drawn from the draft's own logits), and told each emitted token.
  LogitShaper* shaper = nullptr;
  int top_logprobs = -1;            // >= 0: SpecOutcome::logprobs, with this many top ids each
};

struct SpecOutcome {
  std::vector<int32_t> tokens;  // emitted, in order: 1 to k + 1 (fewer when cut by max_new or a stop id)
  std::vector<TokenLogprob> logprobs;  // one per token, from its adjusted target row, when asked
  int verified = 0;             // drafts verified (this sequence's k)
  int accepted = 0;             // of those, accepted (a prefix)
};

// Whether drafting can pay at this batch: some k whose expected tokens per sequence, with the
// per-position acceptance rates `accept` (each given its predecessors were accepted), beat a plain
// step's one token per unit cost once the draft pass is counted too.
bool DraftCanPay(const std::vector<double>& accept, const VerifyCostCurve& curve, int batch);

// Runs speculative steps on one engine. Thread-compatible (one Step at a time).
class Speculator {
 public:
  // Steps that skip drafting between two that draft anyway, to measure acceptance again.
  static constexpr int kProbeInterval = 16;

  // REQUIRES: the engine's model has DSpark layers; curve.max_k() <= the draft block.
  Speculator(Engine* engine, const Model& model, VerifyCostCurve curve);

  // One step for every sequence: draft, choose k, verify, accept, roll back, append the kept
  // positions to the DSpark states. On return each state holds its old positions plus the fed ones
  // (length + tokens.size()), next is the last emitted token, and out[i] says what happened.
  // Drafting is skipped (a plain step, k = 0) when the acceptance measured on recent steps cannot
  // pay for it at this batch (DraftCanPay), but for a probe every kProbeInterval steps.
  // `force_k` >= 0 replaces the scheduler's choice and always drafts (tests, benchmarks). Errors
  // leave the states unusable (the caller ends those sequences).
  Status Step(std::vector<SpecSequence>* seqs, std::vector<SpecOutcome>* out, int* chosen_k, int force_k = -1);

  const VerifyCostCurve& curve() const { return curve_; }
  bool last_step_drafted() const { return last_drafted_; }
  // Recent acceptance by draft position (moving averages; 1 until measured).
  const std::vector<double>& recent_acceptance() const { return recent_; }

 private:
  // One step without a draft: every sequence feeds `next` and samples one token.
  Status PlainStep(std::vector<SpecSequence>* seqs, std::vector<SpecOutcome>* out);
  void Learn(const std::vector<SpecOutcome>& out);

  Engine* engine_;
  const Model& model_;
  VerifyCostCurve curve_;
  std::vector<double> recent_;  // [block]: P(draft j accepted | drafts before it accepted)
  int since_draft_ = 0;
  bool last_drafted_ = false;
};

}  // namespace ds41
