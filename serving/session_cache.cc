#include "serving/session_cache.h"

#include <algorithm>

namespace ds41 {

SessionCache::SessionCache(uint64_t budget_bytes, int64_t ttl_ms, const Clock* clock)
    : budget_(budget_bytes), ttl_ms_(ttl_ms), clock_(clock) {}

std::optional<WarmSession> SessionCache::Take(const std::string& id, const UnitKey& ns, const std::vector<int32_t>& tokens,
                                              int64_t boundary) {
  MutexLock l(&mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return std::nullopt;
  const WarmSession& s = it->second.session;
  if (s.ns != ns || s.state.length < boundary || s.tokens.size() > tokens.size() ||
      static_cast<int64_t>(s.tokens.size()) < boundary ||
      !std::equal(s.tokens.begin(), s.tokens.begin() + boundary, tokens.begin())) {
    return std::nullopt;
  }
  WarmSession out = std::move(it->second.session);
  EraseLocked(it);
  return out;
}

void SessionCache::Put(const std::string& id, WarmSession session) {
  const int64_t now = clock_->NowMs();
  MutexLock l(&mu_);
  if (auto old = map_.find(id); old != map_.end()) EraseLocked(old);
  lru_.push_front(id);
  Entry& e = map_[id];
  e.bytes = session.state.ByteSize();
  e.session = std::move(session);
  e.used_ms = now;
  e.lru = lru_.begin();
  bytes_ += e.bytes;
  EvictLocked(now);
}

void SessionCache::EraseLocked(std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  map_.erase(it);
}

void SessionCache::EvictLocked(int64_t now) {
  // The list is in use order, so its back is the oldest: stop at the first one both budget and TTL keep.
  while (!lru_.empty()) {
    auto oldest = map_.find(lru_.back());
    if (bytes_ <= budget_ && now - oldest->second.used_ms <= ttl_ms_) break;
    EraseLocked(oldest);
  }
}

uint64_t SessionCache::bytes() const {
  MutexLock l(&mu_);
  return bytes_;
}

size_t SessionCache::size() const {
  MutexLock l(&mu_);
  return map_.size();
}

std::vector<std::pair<std::string, int64_t>> SessionCache::List() const {
  MutexLock l(&mu_);
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(map_.size());
  for (const std::string& id : lru_) out.emplace_back(id, map_.at(id).session.state.length);
  return out;
}

}  // namespace ds41
