#include "sim/kv_store.h"

#include <algorithm>

namespace ds41::sim {

KvStore::KvStore(const StoreRates& rates, const NetworkRates& net, double kv_bytes_per_token, int unit_tokens)
    : rates_(rates),
      net_(net),
      bytes_per_token_(kv_bytes_per_token),
      unit_(unit_tokens),
      units_(rates.capacity_bytes, rates.ttl_s),
      shard_free_(static_cast<size_t>(std::max(1, rates.shards)), 0.0) {
  // An evicted tail leaves its parent's index (a full unit's eviction needs nothing: the chain
  // simply stops there).
  units_.set_on_evict([this](uint64_t key, const Entry& e) {
    if (e.tail == 0) return;
    auto it = tails_.find(e.parent);
    if (it == tails_.end()) return;
    auto& v = it->second;
    v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& t) { return t.first == key; }), v.end());
    if (v.empty()) tails_.erase(it);
  });
}

void KvStore::Reserve(int64_t units) {
  const double unit_bytes = unit_ * bytes_per_token_;
  if (unit_bytes > 0)
    units = std::min<int64_t>(units, static_cast<int64_t>(static_cast<double>(rates_.capacity_bytes) / unit_bytes) + 1);
  if (units > 0) units_.Reserve(static_cast<size_t>(units));
}

// How many units ahead a loop over a prompt's units prefetches their index slots.
constexpr int64_t kPrefetchUnits = 8;

int64_t KvStore::Lookup(const PrefixKeys& k, int64_t limit, double now) {
  limit = std::min(limit, k.tokens());
  int64_t full = 0;
  for (int64_t u = 1; u <= kPrefetchUnits && u * unit_ <= limit; ++u) units_.Prefetch(k.At(u * unit_));
  while ((full + 1) * unit_ <= limit && units_.Contains(k.At((full + 1) * unit_), now)) {
    ++full;
    if ((full + kPrefetchUnits) * unit_ <= limit) units_.Prefetch(k.At((full + kPrefetchUnits) * unit_));
  }
  const int64_t base = full * unit_;
  int64_t best = 0;
  auto it = tails_.find(k.At(base));
  if (it != tails_.end()) {
    for (const auto& [key, t] : it->second) {
      if (t <= best || base + t > limit) continue;
      if (k.At(base + t) == key && units_.Contains(key, now)) best = t;
    }
  }
  return base + best;
}

double KvStore::Shard(uint64_t key, uint64_t bytes, double now) {
  double& free = shard_free_[key % shard_free_.size()];
  free = std::max(free, now) + static_cast<double>(bytes) / rates_.shard_bytes_per_s;
  return free;
}

double KvStore::Link(uint64_t bytes, double now, double shards_done) const {
  if (bytes == 0) return now;
  return std::max(shards_done, now + static_cast<double>(bytes) / net_.link_bytes_per_s) + net_.latency_s;
}

StoreTransfer KvStore::Read(const PrefixKeys& k, int64_t upto, double now, int64_t known) {
  StoreTransfer r;
  r.done_at = now;
  upto = std::min(upto, k.tokens());
  double shards_done = now;
  const uint64_t unit_bytes = static_cast<uint64_t>(unit_ * bytes_per_token_);
  int64_t n = 0;
  for (int64_t u = 1; u <= kPrefetchUnits && u * unit_ <= upto; ++u)
    if (u * unit_ > known) units_.Prefetch(k.At(u * unit_));
  for (; n + unit_ <= upto; n += unit_) {
    const int64_t ahead = n + (kPrefetchUnits + 1) * unit_;
    if (ahead <= upto && ahead > known) units_.Prefetch(k.At(ahead));
    const uint64_t key = k.At(n + unit_);
    if (n + unit_ > known && !units_.Find(key, now)) break;
    r.bytes += unit_bytes;
    shards_done = std::max(shards_done, Shard(key, unit_bytes, now));
  }
  if (n + unit_ > upto && upto > n) {  // the tail ending at upto
    const uint64_t key = k.At(upto);
    if (units_.Find(key, now)) {
      const uint64_t b = static_cast<uint64_t>(static_cast<double>(upto - n) * bytes_per_token_);
      r.bytes += b;
      shards_done = std::max(shards_done, Shard(k.At(n), b, now));  // a tail lives with its parent
      n = upto;
    }
  }
  r.reach = n;
  r.done_at = Link(r.bytes, now, shards_done);
  return r;
}

void KvStore::PutUnit(uint64_t key, int64_t tokens, uint64_t parent, int tail, double now) {
  const uint64_t bytes = static_cast<uint64_t>(static_cast<double>(tokens) * bytes_per_token_);
  if (tail > 0 && !units_.Contains(key, now)) {
    auto& v = tails_[parent];
    if (std::none_of(v.begin(), v.end(), [&](const auto& t) { return t.first == key; })) v.emplace_back(key, tail);
  }
  units_.Put(key, bytes, Entry{parent, tail}, now);
}

StoreTransfer KvStore::Write(const PrefixKeys& k, int64_t from, int64_t to, double now) {
  StoreTransfer w;
  to = std::min(to, k.tokens());
  double shards_done = now;
  int64_t n = from / unit_ * unit_;
  for (int64_t u = 1; u <= kPrefetchUnits && n + u * unit_ <= to; ++u) units_.Prefetch(k.At(n + u * unit_));
  for (; n + unit_ <= to; n += unit_) {
    const int64_t ahead = n + (kPrefetchUnits + 1) * unit_;
    if (ahead <= to) units_.Prefetch(k.At(ahead));
    const uint64_t key = k.At(n + unit_);
    PutUnit(key, unit_, 0, 0, now);
    const uint64_t b = static_cast<uint64_t>(unit_ * bytes_per_token_);
    w.bytes += b;
    shards_done = std::max(shards_done, Shard(key, b, now));
  }
  if (to > n) {
    const uint64_t parent = k.At(n);
    PutUnit(k.At(to), to - n, parent, static_cast<int>(to - n), now);
    const uint64_t b = static_cast<uint64_t>(static_cast<double>(to - n) * bytes_per_token_);
    w.bytes += b;
    shards_done = std::max(shards_done, Shard(parent, b, now));
  }
  w.reach = to;
  w.done_at = Link(w.bytes, now, shards_done);
  return w;
}

StoreTransfer KvStore::WriteOpaque(uint64_t id, int64_t tokens, double now) {
  StoreTransfer w;
  double shards_done = now;
  for (int64_t n = 0; n < tokens; n += unit_) {
    const int64_t t = std::min<int64_t>(unit_, tokens - n);
    const uint64_t key = MixKey(id * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(n) + 0x0bad5eedULL);
    PutUnit(key, t, 0, 0, now);
    const uint64_t b = static_cast<uint64_t>(static_cast<double>(t) * bytes_per_token_);
    w.bytes += b;
    shards_done = std::max(shards_done, Shard(key, b, now));
  }
  w.reach = tokens;
  w.done_at = Link(w.bytes, now, shards_done);
  return w;
}

}  // namespace ds41::sim
