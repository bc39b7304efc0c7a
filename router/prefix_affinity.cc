#include "router/prefix_affinity.h"

namespace ds41 {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<uint64_t> PrefixChain(const std::vector<int32_t>& tokens, int unit_tokens, uint64_t seed) {
  std::vector<uint64_t> chain;
  if (unit_tokens <= 0 || tokens.size() < 2) return chain;
  const size_t units = (tokens.size() - 1) / static_cast<size_t>(unit_tokens);
  chain.reserve(units);
  uint64_t h = seed;
  for (size_t u = 0; u < units; ++u) {
    for (size_t i = u * unit_tokens; i < (u + 1) * static_cast<size_t>(unit_tokens); ++i) {
      h = Mix(h ^ static_cast<uint32_t>(tokens[i]));
    }
    chain.push_back(h);
  }
  return chain;
}

int64_t PrefixAffinityIndex::Matched(const std::string& node, const std::vector<uint64_t>& chain) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || chain.empty()) return 0;
  const auto& where = it->second.where;
  // Served prefixes are recorded whole, so the held units form a prefix of the chain unless the
  // LRU dropped an old head: the binary search then finds a shorter match, never a false one.
  if (where.count(chain.back())) return static_cast<int64_t>(chain.size());
  size_t lo = 0, hi = chain.size();  // chain[0, lo) held; chain[hi - 1] not
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (where.count(chain[mid])) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return static_cast<int64_t>(lo);
}

void PrefixAffinityIndex::Record(const std::string& node, const std::vector<uint64_t>& chain) {
  if (chain.empty() || capacity_ <= 0) return;
  Node& n = nodes_[node];
  // The head is touched last, so it is the most recent: eviction takes old chains' tails first and
  // what is held stays a prefix.
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const uint64_t h = *it;
    auto w = n.where.find(h);
    if (w != n.where.end()) n.lru.erase(w->second);
    n.lru.push_front(h);
    n.where[h] = n.lru.begin();
  }
  while (static_cast<int64_t>(n.lru.size()) > capacity_) {
    n.where.erase(n.lru.back());
    n.lru.pop_back();
  }
}

int64_t PrefixAffinityIndex::units(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : static_cast<int64_t>(it->second.lru.size());
}

}  // namespace ds41
