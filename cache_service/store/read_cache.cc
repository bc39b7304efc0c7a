#include "cache_service/store/read_cache.h"

#include <algorithm>

namespace ds41 {
namespace {
// Marks for about twice as many units as the budget holds (a unit is ~57 KB).
constexpr uint64_t kTypicalUnitBytes = 57 * 1024;
}  // namespace

ReadCache::ReadCache(uint64_t budget_bytes, StoreMetrics* metrics)
    : budget_(budget_bytes),
      max_marks_(budget_bytes == 0 ? 0 : static_cast<size_t>(std::max<uint64_t>(1024, 2 * budget_bytes / kTypicalUnitBytes))),
      metrics_(metrics) {
  if (metrics_ != nullptr) metrics_->read_cache_budget_bytes.Set(static_cast<double>(budget_));
}

std::shared_ptr<const std::string> ReadCache::Get(const SegmentLocation& loc) {
  if (budget_ == 0) return nullptr;
  std::shared_ptr<const std::string> out;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find({loc.segment, loc.offset});
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      out = it->second->bytes;
    }
  }
  if (metrics_ != nullptr) (out ? metrics_->read_cache_hits : metrics_->read_cache_misses).Increment();
  return out;
}

void ReadCache::Offer(const SegmentLocation& loc, const std::string& bytes) {
  if (budget_ == 0 || bytes.size() > budget_) return;
  const Key key{loc.segment, loc.offset};
  {
    std::lock_guard<std::mutex> l(mu_);
    if (entries_.count(key) != 0) return;  // (another reader admitted it meanwhile)
    auto m = marked_.find(key);
    if (m == marked_.end()) {
      marks_.push_front(key);
      marked_[key] = marks_.begin();
      if (marks_.size() > max_marks_) {
        marked_.erase(marks_.back());
        marks_.pop_back();
      }
      return;
    }
    marks_.erase(m->second);
    marked_.erase(m);
  }
  // Copied outside the lock (the caller keeps its bytes); a racing Offer of the same location
  // may copy too, and only one is kept.
  auto copy = std::make_shared<const std::string>(bytes);
  std::lock_guard<std::mutex> l(mu_);
  if (entries_.count(key) != 0) return;
  lru_.push_front({key, std::move(copy)});
  entries_[key] = lru_.begin();
  bytes_ += bytes.size();
  EvictLocked();
  if (metrics_ != nullptr) metrics_->read_cache_bytes.Set(static_cast<double>(bytes_));
}

void ReadCache::EvictLocked() {
  while (bytes_ > budget_ && !lru_.empty()) {
    const Entry& e = lru_.back();
    bytes_ -= e.bytes->size();
    entries_.erase(e.key);
    lru_.pop_back();
    if (metrics_ != nullptr) metrics_->read_cache_evictions.Increment();
  }
}

void ReadCache::Erase(const SegmentLocation& loc) {
  if (budget_ == 0) return;
  const Key key{loc.segment, loc.offset};
  std::lock_guard<std::mutex> l(mu_);
  if (auto m = marked_.find(key); m != marked_.end()) {
    marks_.erase(m->second);
    marked_.erase(m);
  }
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  bytes_ -= it->second->bytes->size();
  lru_.erase(it->second);
  entries_.erase(it);
  if (metrics_ != nullptr) metrics_->read_cache_bytes.Set(static_cast<double>(bytes_));
}

void ReadCache::Move(const SegmentLocation& from, const SegmentLocation& to) {
  if (budget_ == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find({from.segment, from.offset});
  if (it == entries_.end()) return;
  const auto pos = it->second;
  entries_.erase(it);
  pos->key = {to.segment, to.offset};
  entries_[pos->key] = pos;
}

uint64_t ReadCache::bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return bytes_;
}

}  // namespace ds41
