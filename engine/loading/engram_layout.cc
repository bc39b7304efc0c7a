#include "engine/loading/engram_layout.h"

#include <algorithm>

#include "engine/loading/numpy_random.h"
#include "util/int128.h"

namespace ds41 {
namespace {

uint64_t MulMod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<uint128>(a) * b % m);
}
uint64_t PowMod(uint64_t b, uint64_t e, uint64_t m) {
  uint64_t r = 1;
  b %= m;
  while (e) {
    if (e & 1) r = MulMod(r, b, m);
    b = MulMod(b, b, m);
    e >>= 1;
  }
  return r;
}

}  // namespace

bool IsPrime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t p : {2ull, 3ull, 5ull, 7ull, 11ull, 13ull, 17ull, 19ull, 23ull, 29ull, 31ull, 37ull}) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int s = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++s;
  }
  for (uint64_t a : {2ull, 3ull, 5ull, 7ull, 11ull, 13ull, 17ull, 19ull, 23ull, 29ull, 31ull, 37ull}) {
    uint64_t x = PowMod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < s && composite; ++i) {
      x = MulMod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

int64_t NextUnusedPrime(int64_t start, const std::vector<int64_t>& used) {
  int64_t c = start + 1;
  while (!IsPrime(static_cast<uint64_t>(c)) || std::find(used.begin(), used.end(), c) != used.end()) ++c;
  return c;
}

std::vector<std::vector<int64_t>> EngramModuli(const ModelConfig& config) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> used;  // primes are never reused across heads, orders or layers
  for (size_t li = 0; li < config.engram_layer_ids.size(); ++li) {
    std::vector<int64_t> moduli;
    for (int n = 2; n <= config.engram_max_ngram_size; ++n) {
      int64_t current = config.engram_vocab_size - 1;  // restarts for every (layer, order)
      for (int h = 0; h < config.engram_n_heads; ++h) {
        current = NextUnusedPrime(current, used);
        used.push_back(current);
        moduli.push_back(current);
      }
    }
    out.push_back(std::move(moduli));
  }
  return out;
}

StatusOr<EngramLayout> EngramLayout::Build(const ModelConfig& config) {
  EngramLayout out;
  out.max_ngram_ = config.engram_max_ngram_size;
  out.heads_ = config.engram_n_heads;
  if (config.engram_layer_ids.empty()) return out;
  // Every multiplier depends on the compressed vocabulary size (MODEL.md §8.3).
  const int64_t bound = std::max<int64_t>(1, (INT64_MAX / config.engram_compressed_vocab_size) / 2);
  const std::vector<std::vector<int64_t>> moduli = EngramModuli(config);
  for (size_t li = 0; li < config.engram_layer_ids.size(); ++li) {
    EngramLayerLayout L;
    L.layer_id = config.engram_layer_ids[li];
    for (int64_t m : moduli[li]) {
      L.offsets.push_back(L.rows);
      L.moduli.push_back(m);
      L.rows += m;
    }
    if (L.rows != config.engram_num_embeddings[li])
      return InvalidArgumentError("config.json: text_config.engram_num_embeddings[" + std::to_string(li) + "] = " +
                                  std::to_string(config.engram_num_embeddings[li]) + " but the bucket primes of layer " +
                                  std::to_string(L.layer_id) + " sum to " + std::to_string(L.rows));
    NumpyPcg64 rng(static_cast<uint64_t>(10007) * static_cast<uint64_t>(L.layer_id));
    DS41_ASSIGN_OR_RETURN(std::vector<int64_t> draws, rng.Integers(bound, out.max_ngram_));
    for (int64_t v : draws) L.multipliers.push_back(v * 2 + 1);
    out.layers_.push_back(std::move(L));
  }
  return out;
}

void EngramLayout::TokenTuple(int64_t current, const int64_t* history, int64_t pad, int64_t* tok) const {
  bool blocked = current == kEngramDead;
  tok[0] = blocked ? pad : current;
  for (int k = 1; k < max_ngram_; ++k) {
    const int64_t c = history[k - 1];
    blocked = blocked || c < 0;  // before the start, or an image token: look-back stops for good
    tok[k] = blocked ? pad : c;
  }
}

void EngramLayout::HashRows(int slot, const int64_t* tok, int64_t* rows) const {
  const EngramLayerLayout& L = layers_[slot];
  int64_t rolling = tok[0] * L.multipliers[0];
  for (int n = 2; n <= max_ngram_; ++n) {
    rolling ^= tok[n - 1] * L.multipliers[n - 1];
    for (int h = 0; h < heads_; ++h) {
      const int col = (n - 2) * heads_ + h;
      rows[col] = rolling % L.moduli[col] + L.offsets[col];
    }
  }
}

}  // namespace ds41
