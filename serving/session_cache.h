// SessionCache: a decoder's warm sessions (SERVING.md §4): the sequence state at a turn's end, kept
// so that the session's next turn continues without loading its prefix. Bounded in bytes; the least
// recently finished session goes first, and a session older than the TTL is dropped. Every
// operation is O(1) in the number of sessions (plus what it evicts).
//
// Thread-safe: one lock guards the table.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/layers/state.h"
#include "unit/unit_key.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

struct WarmSession {
  SequenceState state;
  std::vector<int32_t> tokens;  // [0, state.length)
  UnitKey ns{};
};

class SessionCache {
 public:
  SessionCache(uint64_t budget_bytes, int64_t ttl_ms, const Clock* clock = SystemClock::Get());

  // Takes the session out when it is in namespace `ns`, holds at least `boundary` positions, is no
  // longer than `tokens` and agrees with it on [0, boundary); otherwise leaves it and returns nullopt.
  std::optional<WarmSession> Take(const std::string& id, const UnitKey& ns, const std::vector<int32_t>& tokens,
                                  int64_t boundary);
  // Keeps `session` as `id` (replacing an older one), then evicts to the budget and the TTL (the new
  // session too, when it alone is over the budget).
  void Put(const std::string& id, WarmSession session);

  uint64_t bytes() const;
  size_t size() const;
  // (session, context length held), most recently used first.
  std::vector<std::pair<std::string, int64_t>> List() const;

 private:
  struct Entry {
    WarmSession session;
    uint64_t bytes = 0;
    int64_t used_ms = 0;
    std::list<std::string>::iterator lru;
  };
  void EraseLocked(std::unordered_map<std::string, Entry>::iterator it) DS41_REQUIRES(mu_);
  void EvictLocked(int64_t now) DS41_REQUIRES(mu_);

  const uint64_t budget_;
  const int64_t ttl_ms_;
  const Clock* clock_;
  mutable Mutex mu_;
  std::list<std::string> lru_ DS41_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<std::string, Entry> map_ DS41_GUARDED_BY(mu_);
  uint64_t bytes_ DS41_GUARDED_BY(mu_) = 0;
};

}  // namespace ds41
