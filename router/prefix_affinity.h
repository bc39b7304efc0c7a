// Per-node prefix affinity: which prompt prefixes each node has served, as a router without a shared
// store must track them (SGLang's approximate radix tree per worker). Prefixes are chains of unit
// hashes, so "node X served the first k units" is one lookup of the k-th hash. Bounded: each node
// keeps its most recently served `capacity_units` hashes. Not thread-safe (Placer serializes it).
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace ds41 {

// One hash per whole unit of `tokens` (of N - 1 tokens: the last one is always computed), each
// covering every token before it, so equal hashes mean equal prefixes. `seed` separates tenants
// (the router passes its namespace's), so one tenant's prefixes never draw another's placement.
inline constexpr uint64_t kPrefixChainSeed = 0x6a09e667f3bcc908ULL;
std::vector<uint64_t> PrefixChain(const std::vector<int32_t>& tokens, int unit_tokens,
                                  uint64_t seed = kPrefixChainSeed);

class PrefixAffinityIndex {
 public:
  explicit PrefixAffinityIndex(int64_t capacity_units) : capacity_(capacity_units) {}

  // Units of `chain` that `node` served, from the start (0 when none).
  int64_t Matched(const std::string& node, const std::vector<uint64_t>& chain) const;
  void Record(const std::string& node, const std::vector<uint64_t>& chain);
  int64_t units(const std::string& node) const;

 private:
  struct Node {
    std::list<uint64_t> lru;  // front: most recent
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  };
  const int64_t capacity_;
  std::unordered_map<std::string, Node> nodes_;
};

}  // namespace ds41
