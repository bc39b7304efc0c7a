// ExpertCache: routed experts paged from the mapped checkpoint into owned memory under a byte
// budget, least recently used first out (SERVING.md §1, decoder). Dense weights stay mapped and
// resident; an expert's mapped pages are released once it is copied, so the expert working set is
// what the budget says. Copies hold the codes in the layout the matmul reads (tile-major when the model
// has it) and are byte-identical to their source, so results do not change.
//
// Thread-safe: mu_ guards the LRU list and the map; a missed expert is copied outside it (two
// threads missing the same one both copy, and the first stored wins). The counters are atomics. A
// returned handle keeps its expert alive while in use, even if evicted meanwhile.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/loading/weights.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

struct CachedExpert {
  std::vector<uint8_t> bytes;  // w1, w3, w2: codes then scales, back to back
  ExpertWeights weights;       // views into `bytes`
};

class ExpertCache {
 public:
  ExpertCache(const ModelWeights& weights, uint64_t budget_bytes);

  std::shared_ptr<const CachedExpert> Acquire(int layer, int expert);

  uint64_t hits() const { return hits_.load(); }
  uint64_t misses() const { return misses_.load(); }
  uint64_t evictions() const { return evictions_.load(); }
  uint64_t resident_bytes() const { return resident_.load(); }
  uint64_t budget_bytes() const { return budget_; }

 private:
  const ModelWeights& weights_;
  const uint64_t budget_;
  Mutex mu_;
  std::list<int64_t> lru_ DS41_GUARDED_BY(mu_);  // most recent first
  struct Slot {
    std::shared_ptr<const CachedExpert> expert;
    std::list<int64_t>::iterator pos;
  };
  std::unordered_map<int64_t, Slot> map_ DS41_GUARDED_BY(mu_);
  std::atomic<uint64_t> hits_{0}, misses_{0}, evictions_{0}, resident_{0};
};

}  // namespace ds41
