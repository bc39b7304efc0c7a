// ReadCache: verified unit bytes kept in RAM, by segment location, for the units read again (a
// shared system prompt, a session's earlier turns), within a byte budget, least recently used out
// first.
//
// Payloads written with O_DIRECT are read with it (segment_files.h), so the page cache no longer
// keeps them: this keeps what is reused. A location is admitted on its second read within the recent
// past (the first read leaves only a mark, a few dozen bytes), so a one-pass read of a long cold
// context neither pays a copy per unit nor flushes the hot set. Locations never name other bytes
// later (segment ids only grow) and the store asks only for locations its index holds, so no entry
// can be stale; the store still erases a removed unit's entry (its RAM goes at once) and moves a
// compacted one's.
//
// Thread-safe: mu_ guards the entries, the marks and the byte count (every operation is a hash lookup
// and a list splice; an admitted unit's copy is made outside it).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "cache_service/store/segment_files.h"
#include "cache_service/store/store_metrics.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

class ReadCache {
 public:
  // budget_bytes 0: disabled (Get always misses, Offer keeps nothing). `metrics` may be null.
  ReadCache(uint64_t budget_bytes, StoreMetrics* metrics);

  // The bytes at `loc` if held (counted as a hit or a miss); null otherwise.
  std::shared_ptr<const std::string> Get(const SegmentLocation& loc);
  // `bytes` (verified) were just read from `loc` after a miss: kept if `loc` was read recently.
  void Offer(const SegmentLocation& loc, const std::string& bytes);
  // The unit at `loc` was removed: its entry (or mark) goes.
  void Erase(const SegmentLocation& loc);
  // The unit at `from` now lives at `to` (compaction): its entry follows it, recency kept.
  void Move(const SegmentLocation& from, const SegmentLocation& to);

  uint64_t bytes() const;

 private:
  using Key = std::pair<uint32_t, uint64_t>;  // segment, offset
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.second * 0x9E3779B97F4A7C15ull ^ k.first); }
  };
  struct Entry {
    Key key;
    std::shared_ptr<const std::string> bytes;
  };
  static Key KeyOf(const SegmentLocation& loc) { return {loc.segment, loc.offset}; }
  // Forgets `key`'s mark; whether it had one.
  bool UnmarkLocked(const Key& key) DS41_REQUIRES(mu_);
  void DropLocked(std::list<Entry>::iterator e) DS41_REQUIRES(mu_);
  void EvictLocked() DS41_REQUIRES(mu_);

  const uint64_t budget_;
  const size_t max_marks_;  // locations read once, remembered for admission
  StoreMetrics* metrics_;
  mutable Mutex mu_;
  std::list<Entry> lru_ DS41_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> entries_ DS41_GUARDED_BY(mu_);
  std::list<Key> marks_ DS41_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<Key, std::list<Key>::iterator, KeyHash> marked_ DS41_GUARDED_BY(mu_);
  uint64_t bytes_ DS41_GUARDED_BY(mu_) = 0;
};

}  // namespace ds41
