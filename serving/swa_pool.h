// SwaPool: SWA states held in DRAM for a short while, bounded in bytes, least recently used first
// out, entries expiring after a TTL (SERVING.md §4). Keyed by namespace + prefix key, so a state is
// found by any node that knows the prefix.
//
// Thread-safe: mu_ guards the table.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>

#include "unit/unit_key.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

class SwaPool {
 public:
  SwaPool(uint64_t budget_bytes, int64_t ttl_ms, const Clock* clock = SystemClock::Get());

  void Put(const std::string& key, std::string swa);
  std::optional<std::string> Get(const std::string& key);
  uint64_t bytes() const;
  size_t entries() const;

 private:
  void EvictLocked(int64_t now) DS41_REQUIRES(mu_);

  struct Entry {
    std::string swa;
    int64_t stored_ms = 0;
    std::list<std::string>::iterator pos;
  };
  const uint64_t budget_;
  const int64_t ttl_ms_;
  const Clock* clock_;
  mutable Mutex mu_;
  std::list<std::string> lru_ DS41_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<std::string, Entry> map_ DS41_GUARDED_BY(mu_);
  uint64_t bytes_ DS41_GUARDED_BY(mu_) = 0;
};

// The pool key of the SWA state at the end of prefix `prefix_key` under namespace `ns`.
std::string SwaPoolKey(const UnitKey& ns, const UnitKey& prefix_key);

}  // namespace ds41
