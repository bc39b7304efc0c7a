// UnitPersister: what a node computed, written to the store as units (MODEL.md §10.3) so that any
// node's next request hits it: the encoder's prompt units after a prefill, the decoder's reply units
// at a turn's end. Building is synchronous (the caller may need the bytes); the put runs on the
// process's I/O pool, off the caller's compute loop.
//
// Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "cache_client/cache_client.h"
#include "engine/loading/model.h"
#include "serving/node_metrics.h"
#include "unit/state_units.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"
#include "util/task_group.h"

namespace ds41 {

class UnitPersister {
 public:
  // `cache` may be null (no store); `metrics` (may be null) counts each put's units by outcome; puts
  // run on `io` (null: inline, in Put), which outlives the persister, at most half its threads at
  // once: the rest stay free for the store reads requests wait on (the same pool's fan-out).
  UnitPersister(const Model& model, CacheClient* cache, NodeMetrics* metrics, ThreadPool* io);

  // Units of `state`'s positions [from, to) (from on a unit boundary), keyed under `ns`.
  StatusOr<std::vector<BuiltUnit>> Build(const UnitKey& ns, const SequenceState& state, const std::vector<int32_t>& tokens,
                                         int64_t from, int64_t to, int unit_tokens) const;

  // Puts the units in the background, then runs `then` (if any) on the same I/O thread, once the
  // store acknowledged them or gave up; with no store or no units, runs `then` at once. Units the
  // store refused are counted (units_put_total{status="error"}) and each kind of failure is logged
  // once: a put that fails costs later requests their hits, never this one its reply.
  void Put(const UnitKey& ns, std::vector<BuiltUnit> units, std::function<void()> then = nullptr);

  bool has_store() const { return cache_ != nullptr; }

 private:
  void Count(const PutResult& r);
  // Runs `put` now, or once one of the puts running ends; each put started starts the next.
  void Start(std::function<void()> put);

  const Model& model_;
  CacheClient* cache_;
  NodeMetrics* metrics_;
  const int max_running_;
  Mutex logged_mu_;
  std::set<StatusCode> logged_ DS41_GUARDED_BY(logged_mu_);  // failure kinds already logged
  Mutex queue_mu_;
  std::deque<std::function<void()>> queued_ DS41_GUARDED_BY(queue_mu_);
  int running_ DS41_GUARDED_BY(queue_mu_) = 0;
  TaskGroup puts_;  // last: its destructor waits for every put (and what they start) first
};

}  // namespace ds41
