#include "engine/layers/top_k.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ds41 {
namespace {

// A key whose unsigned order is the float order (+0 for -0); 0 for -inf and NaN, below every
// chosen score (-inf's own key is 0x007FFFFF, so no finite score or +inf maps to 0). Branch-free,
// so the loop that builds the keys vectorizes.
inline uint32_t OrderKey(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = u == 0x80000000u ? 0u : u;
  const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u;
  return f > -INFINITY ? u ^ flip : 0u;
}

}  // namespace

// A radix select on the keys, digits of 11, 11 and 10 bits from the top: one pass builds the keys
// and the top digit's histogram (two copies, so runs of equal digits, common among scores of one
// magnitude, do not chain each increment on the last), the later digits look only at the keys that
// share the chosen top digit, and one pass collects. nth_element's indirect comparisons took 6 % of
// a 16k-token prefill.
std::vector<int32_t> TopKByScore(const std::vector<float>& score, int k) {
  constexpr int kShift[3] = {21, 10, 0};
  constexpr uint32_t kBuckets = 2048;
  std::vector<int32_t> out;
  if (k <= 0) return out;
  const size_t n = score.size();
  std::vector<uint32_t> key(n);
  std::vector<uint32_t> hist(2 * kBuckets, 0);
  for (size_t j = 0; j < n; ++j) key[j] = OrderKey(score[j]);
  size_t never = 0;  // -inf and NaN: key 0, ranked below every chosen key
  for (size_t j = 0; j < n; ++j) {
    ++hist[(j & 1) * kBuckets + (key[j] >> kShift[0])];
    never += key[j] == 0;
  }
  const size_t valid = n - never;
  if (valid <= static_cast<size_t>(k)) {
    out.reserve(valid);
    for (size_t j = 0; j < n; ++j)
      if (key[j] != 0) out.push_back(static_cast<int32_t>(j));
    return out;
  }
  for (uint32_t b = 0; b < kBuckets; ++b) hist[b] += hist[kBuckets + b];
  // The k-th largest key T, digit by digit, and how many keys equal to T are taken (what is left of
  // k after those above T).
  size_t remaining = static_cast<size_t>(k);
  auto choose = [&] {
    uint32_t b = kBuckets - 1;
    for (; hist[b] < remaining; --b) remaining -= hist[b];
    return b;
  };
  uint32_t prefix = choose() << kShift[0];
  std::vector<uint32_t> cand;
  for (uint32_t u : key)
    if ((u >> kShift[0]) << kShift[0] == prefix) cand.push_back(u);
  for (int d = 1; d < 3; ++d) {
    std::fill(hist.begin(), hist.begin() + kBuckets, 0u);
    const uint32_t high = ~0u << kShift[d - 1], digit = (1u << (kShift[d - 1] - kShift[d])) - 1;
    for (uint32_t u : cand)
      if ((u & high) == prefix) ++hist[(u >> kShift[d]) & digit];
    prefix |= choose() << kShift[d];
  }
  out.reserve(static_cast<size_t>(k));
  for (size_t j = 0; j < n; ++j) {
    if (key[j] > prefix) {
      out.push_back(static_cast<int32_t>(j));
    } else if (key[j] == prefix && remaining > 0) {
      out.push_back(static_cast<int32_t>(j));
      --remaining;
    }
  }
  return out;
}

}  // namespace ds41
