#include "engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ds41 {

Status SamplingParams::Validate() const {
  if (!(temperature >= 0.0f) || !std::isfinite(temperature) || temperature > 100.0f)
    return InvalidArgumentError("temperature must be in [0, 100]");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return InvalidArgumentError("top_p must be in (0, 1]");
  return Status::Ok();
}

Status LogitAdjustments::Validate(int vocab_size) const {
  for (const float p : {frequency_penalty, presence_penalty})
    if (!(p >= -2.0f && p <= 2.0f)) return InvalidArgumentError("penalties must be in [-2, 2]");
  std::vector<int32_t> ids;
  for (const auto& [id, b] : bias) {
    if (id < 0 || id >= vocab_size) return InvalidArgumentError("logit_bias names a token outside the vocabulary");
    if (!(b >= -100.0f && b <= 100.0f)) return InvalidArgumentError("logit_bias values must be in [-100, 100]");
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) return InvalidArgumentError("logit_bias repeats a token");
  return Status::Ok();
}

void LogitProcessor::Apply(float* logits, int n) const {
  for (const auto& [id, b] : adj_.bias)
    if (id < n) logits[id] += b;
  if (adj_.frequency_penalty == 0.0f && adj_.presence_penalty == 0.0f) return;
  for (const auto& [id, c] : counts_)
    if (id >= 0 && id < n) logits[id] -= adj_.frequency_penalty * static_cast<float>(c) + adj_.presence_penalty;
}

void LogitProcessor::Count(int32_t token) {
  if (adj_.frequency_penalty != 0.0f || adj_.presence_penalty != 0.0f) ++counts_[token];
}

TokenLogprob LogprobsOf(const float* logits, int n, int32_t token, int top) {
  // log softmax in double: the log-sum-exp around the maximum.
  const double mx = logits[Argmax(logits, n)];
  double total = 0.0;
  for (int i = 0; i < n; ++i) total += std::exp(static_cast<double>(logits[i]) - mx);
  const double log_z = mx + std::log(total);
  TokenLogprob out;
  out.logprob = static_cast<float>(logits[token] - log_z);
  top = std::min(top, n);
  if (top > 0) {
    std::vector<int32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + top, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int i = 0; i < top && std::isfinite(logits[ids[i]]); ++i) {
      out.top.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - log_z));
    }
  }
  return out;
}

namespace {
uint64_t SplitMix(uint64_t* x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = SplitMix(&seed);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int32_t Argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

namespace {
// The nucleus SampleToken draws from at temperature > 0: unnormalized softmax(logits / T) weights,
// ids by decreasing weight (stable), the smallest prefix `keep` whose mass reaches top_p, and its total.
struct Nucleus {
  std::vector<double> weight;
  std::vector<int32_t> order;
  int keep = 0;
  double kept_total = 0.0;
};

Nucleus MakeNucleus(const float* logits, int n, const SamplingParams& p) {
  Nucleus z;
  const double inv_t = 1.0 / p.temperature;
  double mx = logits[Argmax(logits, n)];
  z.weight.resize(n);
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    z.weight[i] = std::exp((logits[i] - mx) * inv_t);
    total += z.weight[i];
  }
  z.order.resize(n);
  std::iota(z.order.begin(), z.order.end(), 0);
  std::stable_sort(z.order.begin(), z.order.end(), [&](int32_t a, int32_t b) { return z.weight[a] > z.weight[b]; });
  // Nucleus: the smallest prefix whose mass reaches top_p (at least one token).
  double mass = 0.0;
  while (z.keep < n) {
    mass += z.weight[z.order[z.keep]] / total;
    ++z.keep;
    if (mass >= p.top_p) break;
  }
  for (int i = 0; i < z.keep; ++i) z.kept_total += z.weight[z.order[i]];
  return z;
}

// Draws an id from weights w [n] (not normalized, total > 0) with one uniform.
int32_t DrawFrom(const std::vector<double>& w, double total, Rng* rng) {
  double u = rng->Uniform() * total;
  int32_t last = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0) continue;
    last = static_cast<int32_t>(i);
    u -= w[i];
    if (u < 0.0) return last;
  }
  return last;
}
}  // namespace

int32_t SampleToken(const float* logits, int n, const SamplingParams& p, Rng* rng) {
  if (p.temperature == 0.0f) return Argmax(logits, n);
  const Nucleus z = MakeNucleus(logits, n, p);
  double u = rng->Uniform() * z.kept_total;
  for (int i = 0; i < z.keep; ++i) {
    u -= z.weight[z.order[i]];
    if (u < 0.0) return z.order[i];
  }
  return z.order[z.keep - 1];
}

std::vector<double> TokenProbabilities(const float* logits, int n, const SamplingParams& p) {
  std::vector<double> prob(n, 0.0);
  if (p.temperature == 0.0f) {
    prob[Argmax(logits, n)] = 1.0;
    return prob;
  }
  const Nucleus z = MakeNucleus(logits, n, p);
  for (int i = 0; i < z.keep; ++i) prob[z.order[i]] = z.weight[z.order[i]] / z.kept_total;
  return prob;
}

DraftVerdict AcceptDraft(const std::vector<double>& p, const std::vector<double>& q, int32_t x, Rng* rng) {
  if (p[x] >= q[x]) return {true, x};  // certain: no draw
  if (p[x] > 0.0 && rng->Uniform() * q[x] < p[x]) return {true, x};
  std::vector<double> residual(p.size());
  double total = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    residual[i] = std::max(0.0, p[i] - q[i]);
    total += residual[i];
  }
  // p(x) < q(x) leaves mass elsewhere (both sum to 1); p == q up to rounding leaves none: draw from p.
  if (!(total > 0.0)) return {false, DrawFrom(p, 1.0, rng)};
  return {false, DrawFrom(residual, total, rng)};
}

}  // namespace ds41
