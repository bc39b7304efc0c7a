#include "serving/swa_pool.h"

namespace ds41 {

std::string SwaPoolKey(const UnitKey& ns, const UnitKey& prefix_key) { return KeyString(ns) + KeyString(prefix_key); }

SwaPool::SwaPool(uint64_t budget_bytes, int64_t ttl_ms, const Clock* clock)
    : budget_(budget_bytes), ttl_ms_(ttl_ms), clock_(clock) {}

void SwaPool::EvictLocked(int64_t now) {
  while (!lru_.empty()) {
    auto it = map_.find(lru_.back());
    const bool expired = ttl_ms_ > 0 && now - it->second.stored_ms > ttl_ms_;
    if (bytes_ <= budget_ && !expired) break;
    bytes_ -= it->second.swa.size();
    map_.erase(it);
    lru_.pop_back();
  }
}

void SwaPool::Put(const std::string& key, std::string swa) {
  if (swa.size() > budget_) return;
  MutexLock l(&mu_);
  const int64_t now = clock_->NowMs();
  auto it = map_.find(key);
  if (it != map_.end()) {
    bytes_ -= it->second.swa.size();
    lru_.erase(it->second.pos);
    map_.erase(it);
  }
  lru_.push_front(key);
  bytes_ += swa.size();
  map_[key] = Entry{std::move(swa), now, lru_.begin()};
  EvictLocked(now);
}

std::optional<std::string> SwaPool::Get(const std::string& key) {
  MutexLock l(&mu_);
  EvictLocked(clock_->NowMs());
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.pos);
  return it->second.swa;
}

uint64_t SwaPool::bytes() const {
  MutexLock l(&mu_);
  return bytes_;
}

size_t SwaPool::entries() const {
  MutexLock l(&mu_);
  return map_.size();
}

}  // namespace ds41
