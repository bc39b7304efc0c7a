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

const PrefixAffinityIndex::Holder* PrefixAffinityIndex::HolderSet::Of(uint32_t id) const {
  if (first.id == id) return &first;
  for (const Holder& h : rest) {
    if (h.id == id) return &h;
  }
  return nullptr;
}

void PrefixAffinityIndex::HolderSet::Add(Holder h) {
  if (first.id == kNone) {
    first = h;
  } else {
    rest.push_back(h);
  }
}

void PrefixAffinityIndex::HolderSet::Remove(uint32_t id) {
  if (first.id == id) {
    if (rest.empty()) {
      first = Holder{kNone, 0};
    } else {
      first = rest.back();
      rest.pop_back();
    }
    return;
  }
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i].id == id) {
      rest[i] = rest.back();
      rest.pop_back();
      return;
    }
  }
}

std::optional<uint32_t> PrefixAffinityIndex::IdOf(const std::string& node) const {
  auto it = ids_.find(node);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const PrefixAffinityIndex::HolderSet* PrefixAffinityIndex::HoldersOf(uint64_t h) const {
  const Holders& shard = ShardOf(h);
  auto it = shard.find(h);
  return it == shard.end() ? nullptr : &it->second;
}

bool PrefixAffinityIndex::Holds(uint32_t id, uint64_t h) const {
  const HolderSet* set = HoldersOf(h);
  return set != nullptr && set->Of(id) != nullptr;
}

namespace {

// Served prefixes are recorded whole, so what a node holds is a prefix of the chain unless the
// LRU dropped an old head: the search then finds a shorter match, never a false one. Returns the
// length of the longest prefix whose last unit `held` says is held.
template <typename Held>
size_t LongestHeld(const std::vector<uint64_t>& chain, Held held) {
  if (held(chain.back())) return chain.size();
  size_t lo = 0, hi = chain.size();  // chain[0, lo) held; chain[hi - 1] not
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (held(chain[mid])) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace

int64_t PrefixAffinityIndex::Matched(const std::string& node, const std::vector<uint64_t>& chain) const {
  const std::optional<uint32_t> id = IdOf(node);
  if (!id || chain.empty()) return 0;
  return static_cast<int64_t>(LongestHeld(chain, [&](uint64_t h) { return Holds(*id, h); }));
}

int64_t PrefixAffinityIndex::Best(const std::vector<const std::string*>& nodes, const std::vector<uint64_t>& chain,
                                  std::vector<char>* at_best) const {
  at_best->assign(nodes.size(), 0);
  if (chain.empty() || nodes.empty()) return 0;
  // Which known nodes are asked about, and where they sit in `nodes`.
  std::vector<int32_t> slot(nodes_.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (const std::optional<uint32_t> id = IdOf(*nodes[i])) slot[*id] = static_cast<int32_t>(i);
  }
  auto held = [&](uint64_t h) {
    const HolderSet* ids = HoldersOf(h);
    return ids != nullptr && ids->Any([&](uint32_t id) { return slot[id] >= 0; });
  };
  const size_t best = LongestHeld(chain, held);
  if (best == 0) return 0;
  HoldersOf(chain[best - 1])->Any([&](uint32_t id) {
    if (slot[id] >= 0) (*at_best)[static_cast<size_t>(slot[id])] = 1;
    return false;
  });
  return static_cast<int64_t>(best);
}

void PrefixAffinityIndex::Record(const std::string& node, const std::vector<uint64_t>& chain) {
  if (chain.empty() || capacity_ <= 0) return;
  auto [at, added] = ids_.try_emplace(node, static_cast<uint32_t>(nodes_.size()));
  if (added) nodes_.emplace_back();
  const uint32_t id = at->second;
  Node& n = nodes_[id];
  // The head is touched last, so it is the most recent: eviction takes old chains' tails first and
  // what is held stays a prefix.
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const uint64_t h = *it;
    const uint64_t stamp = ++n.clock;
    HolderSet& set = ShardOf(h)[h];
    if (Holder* mine = set.Of(id)) {
      mine->stamp = stamp;
    } else {
      set.Add({id, stamp});
      ++n.held;
    }
    n.order.emplace_back(h, stamp);
  }
  while (n.held > capacity_) {
    const auto [h, when] = n.order.front();
    n.order.pop_front();
    Holders& shard = ShardOf(h);
    auto set = shard.find(h);
    if (set == shard.end()) continue;
    const Holder* mine = set->second.Of(id);
    if (mine == nullptr || mine->stamp != when) continue;  // touched again since: not the oldest
    set->second.Remove(id);
    if (set->second.empty()) shard.erase(set);
    --n.held;
  }
  // Re-served prefixes leave stale touches behind; once they outnumber the live ones, keep only the
  // live ones (in order), so the queue stays within about twice what the node holds.
  if (static_cast<int64_t>(n.order.size()) > 2 * n.held + 1024) {
    std::deque<std::pair<uint64_t, uint64_t>> live;
    for (const auto& [h, when] : n.order) {
      const HolderSet* set = HoldersOf(h);
      const Holder* mine = set == nullptr ? nullptr : set->Of(id);
      if (mine != nullptr && mine->stamp == when) live.emplace_back(h, when);
    }
    n.order.swap(live);
  }
}

int64_t PrefixAffinityIndex::units(const std::string& node) const {
  const std::optional<uint32_t> id = IdOf(node);
  return id ? nodes_[*id].held : 0;
}

}  // namespace ds41
