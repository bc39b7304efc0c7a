#include "cache_service/store/read_cache.h"

#include <algorithm>
#include <iterator>

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
    MutexLock l(&mu_);
    auto it = entries_.find(KeyOf(loc));
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
  const Key key = KeyOf(loc);
  {
    MutexLock l(&mu_);
    if (entries_.count(key) != 0) return;  // (another reader admitted it meanwhile)
    if (!UnmarkLocked(key)) {  // a first read: marked only
      marks_.push_front(key);
      marked_[key] = marks_.begin();
      if (marks_.size() > max_marks_) {
        marked_.erase(marks_.back());
        marks_.pop_back();
      }
      return;
    }
  }
  // Copied outside the lock (the caller keeps its bytes); a racing Offer of the same location
  // may copy too, and only one is kept.
  auto copy = std::make_shared<const std::string>(bytes);
  MutexLock l(&mu_);
  if (entries_.count(key) != 0) return;
  lru_.push_front({key, std::move(copy)});
  entries_[key] = lru_.begin();
  bytes_ += bytes.size();
  EvictLocked();
  if (metrics_ != nullptr) metrics_->read_cache_bytes.Set(static_cast<double>(bytes_));
}

bool ReadCache::UnmarkLocked(const Key& key) {
  auto m = marked_.find(key);
  if (m == marked_.end()) return false;
  marks_.erase(m->second);
  marked_.erase(m);
  return true;
}

void ReadCache::DropLocked(std::list<Entry>::iterator e) {
  bytes_ -= e->bytes->size();
  entries_.erase(e->key);
  lru_.erase(e);
}

void ReadCache::EvictLocked() {
  while (bytes_ > budget_ && !lru_.empty()) {
    DropLocked(std::prev(lru_.end()));
    if (metrics_ != nullptr) metrics_->read_cache_evictions.Increment();
  }
}

void ReadCache::Erase(const SegmentLocation& loc) {
  if (budget_ == 0) return;
  const Key key = KeyOf(loc);
  MutexLock l(&mu_);
  UnmarkLocked(key);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  DropLocked(it->second);
  if (metrics_ != nullptr) metrics_->read_cache_bytes.Set(static_cast<double>(bytes_));
}

void ReadCache::Move(const SegmentLocation& from, const SegmentLocation& to) {
  if (budget_ == 0) return;
  MutexLock l(&mu_);
  auto it = entries_.find(KeyOf(from));
  if (it == entries_.end()) return;
  const auto pos = it->second;
  entries_.erase(it);
  pos->key = KeyOf(to);
  entries_[pos->key] = pos;
}

uint64_t ReadCache::bytes() const {
  MutexLock l(&mu_);
  return bytes_;
}

}  // namespace ds41
