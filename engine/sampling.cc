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

int32_t SampleToken(const float* logits, int n, const SamplingParams& p, Rng* rng) {
  if (p.temperature == 0.0f) return Argmax(logits, n);
  const double inv_t = 1.0 / p.temperature;
  double mx = logits[Argmax(logits, n)];
  std::vector<double> prob(n);
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    prob[i] = std::exp((logits[i] - mx) * inv_t);
    total += prob[i];
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return prob[a] > prob[b]; });
  // Nucleus: the smallest prefix whose mass reaches top_p (at least one token).
  double mass = 0.0;
  int keep = 0;
  while (keep < n) {
    mass += prob[order[keep]] / total;
    ++keep;
    if (mass >= p.top_p) break;
  }
  double kept_total = 0.0;
  for (int i = 0; i < keep; ++i) kept_total += prob[order[i]];
  double u = rng->Uniform() * kept_total;
  for (int i = 0; i < keep; ++i) {
    u -= prob[order[i]];
    if (u < 0.0) return order[i];
  }
  return order[keep - 1];
}

}  // namespace ds41
