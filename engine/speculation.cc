#include "engine/speculation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

namespace ds41 {
namespace {

// Linear interpolation of per-batch values over the measured batch sizes.
double Interpolate(const std::vector<int>& batches, const std::function<double(size_t)>& at, int batch) {
  if (batch <= batches.front()) return at(0);
  for (size_t i = 1; i < batches.size(); ++i) {
    if (batch <= batches[i]) {
      const double t = static_cast<double>(batch - batches[i - 1]) / (batches[i] - batches[i - 1]);
      return at(i - 1) + t * (at(i) - at(i - 1));
    }
  }
  return at(batches.size() - 1);
}

double Seconds(const std::function<Status()>& fn, int repeats, Status* status) {
  double best = 1e300;
  for (int r = 0; r < repeats && status->ok(); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    *status = fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

double VerifyCostCurve::Verify(int k, int batch) const {
  return Interpolate(batches, [&](size_t i) { return verify[i][static_cast<size_t>(k)]; }, batch);
}

double VerifyCostCurve::Draft(int batch) const {
  return Interpolate(batches, [&](size_t i) { return draft[i]; }, batch);
}

StatusOr<VerifyCostCurve> MeasureVerifyCost(Engine& engine, const Model& model, const std::vector<int>& batches,
                                            int max_k, int prompt, int repeats) {
  const ModelConfig& c = model.config();
  if (!c.has_dspark()) return FailedPreconditionError("verify cost: the model has no DSpark layers");
  if (batches.empty() || !std::is_sorted(batches.begin(), batches.end()) || batches.front() < 1 || max_k < 1 ||
      max_k > c.dspark_block_size || prompt < 1 || repeats < 1)
    return InvalidArgumentError("verify cost: bad batch sizes, k, prompt or repeats");
  VerifyCostCurve curve;
  curve.batches = batches;
  for (int B : batches) {
    std::vector<SequenceState> states(static_cast<size_t>(B), SequenceState::Create(c));
    std::vector<DsparkState> dspark(static_cast<size_t>(B), DsparkState::Create(c));
    std::vector<SequenceState*> ptrs;
    std::vector<DraftRequest> requests;
    for (int b = 0; b < B; ++b) {
      TokenSpan span;
      for (int i = 0; i < prompt; ++i) span.tokens.push_back(3 + (b * 131 + i * 17) % std::max(1, c.vocab_size - 3));
      std::vector<float> logits, hidden;
      DS41_RETURN_IF_ERROR(engine.Prefill(&states[b], span, false, &logits, &hidden));
      DS41_RETURN_IF_ERROR(engine.DsparkAppend(&dspark[b], 0, hidden));
      ptrs.push_back(&states[b]);
      requests.push_back({&dspark[b], span.tokens.back()});
    }
    Status st;
    std::vector<double> seconds;
    for (int k = 0; k <= max_k; ++k) {
      // k + 1 rows per sequence, then back to where they started.
      const std::vector<std::vector<int32_t>> rows(static_cast<size_t>(B), std::vector<int32_t>(k + 1, 5));
      seconds.push_back(Seconds([&]() -> Status {
        std::vector<float> logits, hidden;
        std::vector<StateUndo> undo;
        DS41_RETURN_IF_ERROR(engine.VerifyBatch(ptrs, rows, &logits, &hidden, &undo));
        for (int b = 0; b < B; ++b) DS41_RETURN_IF_ERROR(RollBack(c, undo[b], undo[b].start, ptrs[b]));
        return Status::Ok();
      }, repeats, &st));
    }
    const double draft = Seconds([&] {
      std::vector<Draft> drafts;
      return engine.DsparkDraft(requests, nullptr, &drafts);
    }, repeats, &st);
    DS41_RETURN_IF_ERROR(st);
    // More rows never cost less: a dip is timing noise, which would steer the scheduler.
    std::vector<double> rel;
    for (double s : seconds) rel.push_back(std::max(s / seconds[0], rel.empty() ? 1.0 : rel.back()));
    curve.verify.push_back(std::move(rel));
    curve.draft.push_back(draft / seconds[0]);
  }
  return curve;
}

double AcceptanceEstimate(float confidence) { return 1.0 / (1.0 + std::exp(-static_cast<double>(confidence))); }

double ExpectedTokens(const std::vector<double>& a, int k) {
  double e = 1.0, all = 1.0;
  for (int i = 0; i < k && i < static_cast<int>(a.size()); ++i) {
    all *= a[static_cast<size_t>(i)];
    e += all;
  }
  return e;
}

int ChooseVerifyLength(const std::vector<std::vector<double>>& accept, const VerifyCostCurve& curve) {
  const int B = static_cast<int>(accept.size());
  int best_k = 0;
  double best = static_cast<double>(B);  // k = 0: one token each at cost 1
  for (int k = 1; k <= curve.max_k(); ++k) {
    double tokens = 0.0;
    for (const auto& a : accept) tokens += ExpectedTokens(a, k);
    const double rate = tokens / curve.Verify(k, B);
    if (rate > best) {
      best = rate;
      best_k = k;
    }
  }
  return best_k;
}

bool DraftCanPay(const std::vector<double>& accept, const VerifyCostCurve& curve, int batch) {
  const int top = std::min(curve.max_k(), static_cast<int>(accept.size()));
  for (int k = 1; k <= top; ++k)
    if (ExpectedTokens(accept, k) > curve.Verify(k, batch) + curve.Draft(batch)) return true;
  return false;
}

Speculator::Speculator(Engine* engine, const Model& model, VerifyCostCurve curve)
    : engine_(engine),
      model_(model),
      curve_(std::move(curve)),
      recent_(static_cast<size_t>(model.config().dspark_block_size), 1.0) {}

void Speculator::Learn(const std::vector<SpecOutcome>& out) {
  // A moving average per position over the sequences that reached it: a draft is verified only
  // after its predecessors were accepted, so this is the conditional rate ExpectedTokens takes.
  constexpr double kWeight = 0.05;
  for (const SpecOutcome& o : out)
    for (int j = 0; j < o.verified && j < static_cast<int>(recent_.size()); ++j) {
      recent_[j] += kWeight * ((j < o.accepted ? 1.0 : 0.0) - recent_[j]);
      if (j >= o.accepted) break;
    }
}

namespace {

void Adjust(const SpecSequence& s, float* row, int V) {
  if (s.shaper != nullptr) s.shaper->Shape(row, V);
}

// `token` emitted from the adjusted target row `row`.
void Emit(const SpecSequence& s, const float* row, int V, int32_t token, SpecOutcome* o) {
  o->tokens.push_back(token);
  if (s.shaper != nullptr) s.shaper->Emitted(token);
  if (s.top_logprobs >= 0) o->logprobs.push_back(LogprobsOf(row, V, token, s.top_logprobs));
}

}  // namespace

Status Speculator::PlainStep(std::vector<SpecSequence>* seqs, std::vector<SpecOutcome>* out) {
  const ModelConfig& c = model_.config();
  std::vector<SequenceState*> states;
  std::vector<std::vector<int32_t>> rows;
  for (const SpecSequence& s : *seqs) {
    states.push_back(s.state);
    rows.push_back({s.next});
  }
  std::vector<float> logits, hidden;
  std::vector<StateUndo> undo;
  DS41_RETURN_IF_ERROR(engine_->VerifyBatch(states, rows, &logits, &hidden, &undo));
  const size_t width = c.dspark_target_layer_ids.size() * static_cast<size_t>(c.dim);
  for (size_t i = 0; i < seqs->size(); ++i) {
    SpecSequence& s = (*seqs)[i];
    float* row = &logits[i * static_cast<size_t>(c.vocab_size)];
    Adjust(s, row, c.vocab_size);
    s.next = SampleToken(row, c.vocab_size, s.sampling, s.rng);
    Emit(s, row, c.vocab_size, s.next, &(*out)[i]);
    const std::vector<float> kept(hidden.begin() + static_cast<std::ptrdiff_t>(i * width),
                                  hidden.begin() + static_cast<std::ptrdiff_t>((i + 1) * width));
    DS41_RETURN_IF_ERROR(engine_->DsparkAppend(s.dspark, undo[i].start, kept));
  }
  return Status::Ok();
}

Status Speculator::Step(std::vector<SpecSequence>* seqs, std::vector<SpecOutcome>* out, int* chosen_k, int force_k) {
  const ModelConfig& c = model_.config();
  const int V = c.vocab_size;
  std::vector<SpecSequence>& ss = *seqs;
  const size_t n = ss.size();
  out->assign(n, SpecOutcome{});
  last_drafted_ = force_k >= 0 || ++since_draft_ > kProbeInterval ||
                  DraftCanPay(recent_, curve_, static_cast<int>(n));
  if (!last_drafted_) {
    *chosen_k = 0;
    return PlainStep(seqs, out);
  }
  since_draft_ = 0;
  // Draft: greedy sequences pick the first maximum (the argmax the verifier compares with), sampled
  // ones draw from their own distribution q, which the acceptance rule needs.
  std::vector<DraftRequest> requests;
  for (const SpecSequence& s : ss) requests.push_back({s.dspark, s.next});
  std::vector<Draft> drafts;
  DS41_RETURN_IF_ERROR(engine_->DsparkDraft(requests, [&](size_t r, int, const float* logits) {
    const SpecSequence& s = ss[r];
    return s.sampling.temperature == 0.0f ? GreedyDraftPick(logits, V) : SampleToken(logits, V, s.sampling, s.rng);
  }, &drafts));

  // Verifying more drafts than the sequence may still emit is waste.
  std::vector<std::vector<double>> accept(n);
  for (size_t i = 0; i < n; ++i) {
    const int cap = std::min(c.dspark_block_size, ss[i].max_new - 1);
    for (int j = 0; j < cap; ++j) accept[i].push_back(AcceptanceEstimate(drafts[i].confidence[j]));
  }
  const int k = force_k >= 0 ? std::min(force_k, c.dspark_block_size) : ChooseVerifyLength(accept, curve_);
  *chosen_k = k;

  std::vector<SequenceState*> states;
  std::vector<std::vector<int32_t>> rows(n);
  for (size_t i = 0; i < n; ++i) {
    states.push_back(ss[i].state);
    const int ki = std::min(k, static_cast<int>(accept[i].size()));
    rows[i].push_back(ss[i].next);
    rows[i].insert(rows[i].end(), drafts[i].tokens.begin(), drafts[i].tokens.begin() + ki);
    (*out)[i].verified = ki;
  }
  std::vector<float> logits, hidden;
  std::vector<StateUndo> undo;
  DS41_RETURN_IF_ERROR(engine_->VerifyBatch(states, rows, &logits, &hidden, &undo));

  const size_t width = c.dspark_target_layer_ids.size() * static_cast<size_t>(c.dim);
  size_t row0 = 0;
  for (size_t i = 0; i < n; ++i) {
    SpecSequence& s = ss[i];
    SpecOutcome& o = (*out)[i];
    // Row j's logits predict the token after row j's: draft j is checked against row j.
    auto row = [&](int j) { return &logits[(row0 + static_cast<size_t>(j)) * V]; };
    bool all = true;
    for (int j = 0; j < o.verified; ++j) {
      const int32_t x = drafts[i].tokens[j];
      Adjust(s, row(j), V);  // after the tokens accepted before it were counted
      DraftVerdict v;
      if (s.sampling.temperature == 0.0f) {  // AcceptDraft with one-hot p and q, without the vectors
        v.token = Argmax(row(j), V);
        v.accepted = v.token == x;
      } else {
        v = AcceptDraft(TokenProbabilities(row(j), V, s.sampling),
                        TokenProbabilities(&drafts[i].logits[static_cast<size_t>(j) * V], V, s.sampling), x, s.rng);
      }
      Emit(s, row(j), V, v.token, &o);
      if (!v.accepted) {
        all = false;
        break;
      }
      ++o.accepted;
    }
    if (all) {
      Adjust(s, row(o.verified), V);
      Emit(s, row(o.verified), V, SampleToken(row(o.verified), V, s.sampling, s.rng), &o);
    }
    // Cut at the first stop id (kept) and at the step's budget.
    for (size_t t = 0; t < o.tokens.size(); ++t) {
      if (std::find(s.stop_ids.begin(), s.stop_ids.end(), o.tokens[t]) != s.stop_ids.end()) {
        o.tokens.resize(t + 1);
        break;
      }
    }
    if (static_cast<int>(o.tokens.size()) > s.max_new) o.tokens.resize(static_cast<size_t>(s.max_new));
    // A cut token was told to the shaper too; the sequence ends with this step then.
    if (o.logprobs.size() > o.tokens.size()) o.logprobs.resize(o.tokens.size());
    // Fed and kept: `next` and the drafts the emitted tokens repeat, one row per emitted token.
    const int64_t start = undo[i].start, fed = static_cast<int64_t>(o.tokens.size());
    DS41_RETURN_IF_ERROR(RollBack(c, undo[i], start + fed, s.state));
    const std::vector<float> kept(hidden.begin() + static_cast<std::ptrdiff_t>(row0 * width),
                                  hidden.begin() + static_cast<std::ptrdiff_t>((row0 + fed) * width));
    DS41_RETURN_IF_ERROR(engine_->DsparkAppend(s.dspark, start, kept));
    s.next = o.tokens.back();
    row0 += rows[i].size();
  }
  Learn(*out);
  return Status::Ok();
}

}  // namespace ds41
