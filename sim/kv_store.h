// KvStore: the global-KV store as the simulator sees it — units of `unit_tokens` tokens at
// kv_bytes_per_token each, keyed by prefix identity (prefix_keys.h), with a tail unit at a prompt's
// end so the next turn can hit it exactly (SERVING.md §3); LRU beyond the capacity, idle units
// expiring after the TTL; and bandwidth: each shard is a FIFO server of shard_bytes_per_s, a unit
// lives on the shard its key picks, and a transfer also passes the reader's (or writer's) link.
// The shared scope has one KvStore; the per-node scope gives each encoder its own.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "router/rate_profile.h"
#include "sim/byte_lru.h"
#include "sim/prefix_keys.h"

namespace ds41::sim {

struct StoreTransfer {
  int64_t reach = 0;    // tokens read (a read stops at the first unit missing)
  uint64_t bytes = 0;
  double done_at = 0;   // when the last byte arrived (or was acknowledged)
};

class KvStore {
 public:
  KvStore(const StoreRates& rates, const NetworkRates& net, double kv_bytes_per_token, int unit_tokens);

  // The cache client's LookupPrefix over [0, limit): whole units from the start while held, then
  // the longest tail after them that this prompt agrees with. Touches nothing.
  int64_t Lookup(const PrefixKeys& k, int64_t limit, double now);
  // Reads [0, upto) (whole units, then the tail ending at upto when upto is not on a boundary),
  // touching what it reads. Units below `known` (a unit boundary) were read a moment ago by this
  // request's other node: they are taken as present (their bytes still move) without a lookup.
  StoreTransfer Read(const PrefixKeys& k, int64_t upto, double now, int64_t known = 0);
  // Writes the prompt's units covering [from, to): `from` is rounded down to a unit boundary, a
  // partial last unit is a tail. done_at: when the shards acknowledged.
  StoreTransfer Write(const PrefixKeys& k, int64_t from, int64_t to, double now);
  // Writes `tokens` tokens of units no prompt will ever ask for (a reply's generated units), under
  // keys derived from `id`.
  StoreTransfer WriteOpaque(uint64_t id, int64_t tokens, double now);

  // Sizes the tables for `units` units written (full, tail or opaque), fewer when the capacity
  // holds fewer full units: growing them by doubling copies every entry and rehashes every key.
  void Reserve(int64_t units);

  uint64_t bytes() const { return units_.bytes(); }
  size_t units() const { return units_.size(); }
  uint64_t evicted_capacity() const { return units_.evicted_capacity(); }
  uint64_t evicted_ttl() const { return units_.evicted_ttl(); }

 private:
  struct Entry {
    uint64_t parent = 0;  // tails: the key of the last full unit before them (their index's key)
    int32_t tail = 0;     // tails: tokens; 0 for a full unit
  };
  void PutUnit(uint64_t key, int64_t tokens, uint64_t parent, int tail, double now);
  // Books `bytes` on `key`'s shard from `now` on; returns when they are through.
  double Shard(uint64_t key, uint64_t bytes, double now);
  double Link(uint64_t bytes, double now, double shards_done) const;

  const StoreRates rates_;
  const NetworkRates net_;
  const double bytes_per_token_;
  const int unit_;
  ByteLru<Entry> units_;
  std::unordered_map<uint64_t, std::vector<std::pair<uint64_t, int32_t>>> tails_;  // parent -> (tail key, tokens)
  std::vector<double> shard_free_;  // when each shard's queue empties
};

}  // namespace ds41::sim
