// Engram bucket layout and n-gram hashing (MODEL.md §8.2-8.3).
//
// Per Engram layer: one prime modulus per (n-gram order, head) column, drawn in order from
// engram_vocab_size - 1 and never reused; column offsets are running sums; multipliers come from
// numpy's PCG64 seeded with 10007 * layer_id. Immutable after Build(); thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/config/config.h"
#include "util/status.h"

namespace ds41 {

// Compressed-id sentinels used in n-gram histories.
inline constexpr int64_t kEngramDead = -1;         // image-span token: blocks look-back
inline constexpr int64_t kEngramBeforeStart = -2;  // position < 0

struct EngramLayerLayout {
  int layer_id = 0;
  std::vector<int64_t> moduli;       // [cols], col = (n - 2) * heads + h
  std::vector<int64_t> offsets;      // [cols]
  std::vector<int64_t> multipliers;  // [max_ngram]
  int64_t rows = 0;                  // sum of moduli = table rows
};

class EngramLayout {
 public:
  // Derives primes, offsets and multipliers; InvalidArgument when a table's row count in the config
  // differs from the sum of its primes.
  static StatusOr<EngramLayout> Build(const ModelConfig& config);

  const std::vector<EngramLayerLayout>& layers() const { return layers_; }
  int max_ngram() const { return max_ngram_; }
  int heads() const { return heads_; }
  int cols() const { return (max_ngram_ - 1) * heads_; }

  // The n-gram token tuple of one position: history[k] is the compressed id at t - 1 - k
  // (kEngramDead / kEngramBeforeStart allowed), `current` the id at t (kEngramDead for an image token).
  // tok[0..max_ngram) follows the look-back rules of §8.3 with `pad` filling blocked slots.
  void TokenTuple(int64_t current, const int64_t* history, int64_t pad, int64_t* tok) const;

  // 24 (cols) table rows of one layer for a token tuple.
  void HashRows(int slot, const int64_t* tok, int64_t* rows) const;

 private:
  std::vector<EngramLayerLayout> layers_;
  int max_ngram_ = 0;
  int heads_ = 0;
};

// Bucket moduli per Engram layer ([layers][cols]) by the rules of MODEL.md §8.2.
std::vector<std::vector<int64_t>> EngramModuli(const ModelConfig& config);

// Smallest prime > start not in `used` (deterministic Miller-Rabin; exact for all uint64).
int64_t NextUnusedPrime(int64_t start, const std::vector<int64_t>& used);
bool IsPrime(uint64_t n);


}  // namespace ds41
