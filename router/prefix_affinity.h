// Per-node prefix affinity: which prompt prefixes each node has served, as a router without a shared
// store must track them (SGLang's approximate radix tree per worker). Prefixes are chains of unit
// hashes, so "node X served the first k units" is one lookup of the k-th hash. Bounded: each node
// keeps its most recently served `capacity_units` hashes. Not thread-safe (Placer serializes it).
#pragma once

#include <cstdint>
#include <cstddef>
#include <deque>
#include <optional>
#include <utility>
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
  // The most units of `chain` any of `nodes` served, from the start, and which of them served that
  // many ((*at_best)[i]): what Matched gives node by node, in one search of the chain for all of
  // them, so a decision over a thousand nodes costs a few lookups per chain, not per node.
  int64_t Best(const std::vector<const std::string*>& nodes, const std::vector<uint64_t>& chain,
               std::vector<char>* at_best) const;
  void Record(const std::string& node, const std::vector<uint64_t>& chain);
  int64_t units(const std::string& node) const;

 private:
  // A node's units leave least recently served first, without a list node per unit: its touches
  // are appended in order with a stamp, and a touch counts while its stamp is still the one the
  // unit's holder entry carries (older ones are skipped when they reach the front, and dropped
  // whenever they outnumber the live ones).
  struct Node {
    std::deque<std::pair<uint64_t, uint64_t>> order;  // (hash, stamp), oldest first
    int64_t held = 0;                                  // units held
    uint64_t clock = 0;
  };
  // The nodes holding one unit, each with the stamp of its latest touch: mostly one node, kept
  // without an allocation.
  struct Holder {
    uint32_t id;
    uint64_t stamp;
  };
  struct HolderSet {
    static constexpr uint32_t kNone = ~uint32_t{0};
    Holder first{kNone, 0};
    std::vector<Holder> rest;
    const Holder* Of(uint32_t id) const;  // null: `id` does not hold it
    Holder* Of(uint32_t id) { return const_cast<Holder*>(static_cast<const HolderSet*>(this)->Of(id)); }
    void Add(Holder h);
    void Remove(uint32_t id);
    bool empty() const { return first.id == kNone; }
    template <typename F>
    bool Any(F f) const {  // f(id) for each until it returns true
      if (first.id != kNone && f(first.id)) return true;
      for (const Holder& h : rest) {
        if (f(h.id)) return true;
      }
      return false;
    }
  };
  std::optional<uint32_t> IdOf(const std::string& node) const;
  const HolderSet* HoldersOf(uint64_t h) const;  // null: no node holds `h`
  bool Holds(uint32_t id, uint64_t h) const;

  const int64_t capacity_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Node> nodes_;
  // Per unit hash, the nodes that hold it: a chain is searched once for every node. In shards by
  // the hash's low bits, so that growing one rehashes a thousandth of them, not a pause under the
  // placing lock of everything a thousand nodes hold.
  static constexpr size_t kHolderShards = 1024;
  using Holders = std::unordered_map<uint64_t, HolderSet>;
  Holders& ShardOf(uint64_t h) { return holders_[h & (kHolderShards - 1)]; }
  const Holders& ShardOf(uint64_t h) const { return holders_[h & (kHolderShards - 1)]; }
  std::vector<Holders> holders_ = std::vector<Holders>(kHolderShards);
};

}  // namespace ds41
