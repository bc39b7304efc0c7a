// InflightLoads: the work this router has sent to each node and not yet seen done, and the work it
// has seen done lately. Node polls come once a second, so a polled load is up to a second old both
// ways: a burst between two polls would find every node's load unchanged and pile onto the one that
// looked idle, and a queue that drained just after a poll would still look full (overload shedding
// would refuse requests to idle nodes). Placement sees, per node, the polled load less what this
// router saw finish since the poll, and at least this router's own count (with several router
// replicas each still sees at least its own work). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

#include "router/placement.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

class InflightLoads {
 public:
  using Clock = std::chrono::steady_clock;

  // The request was sent as placed: its decoder holds one more sequence, its encoder (if any) the
  // request's uncached tokens until the first token comes back. `now` is when it happened (the
  // simulator passes its own clock).
  void Started(const Placement& p);
  void Prefilled(const Placement& p, Clock::time_point now = Clock::now());  // the encoder's share is done
  void Ended(const Placement& p, bool prefilled, Clock::time_point now = Clock::now());

  // Adjusts each node's polled load as the header says.
  void Apply(std::vector<NodeLoad>* decoders, std::vector<NodeLoad>* encoders) const;
  // The same, walking the nodes this router knows of instead of the candidates: for callers that can
  // find a candidate by address without hashing it (a simulator with 1,000 candidates per placement).
  // index_of(address, is_decoder): the candidate's position in its vector, or -1 when none.
  void Apply(std::vector<NodeLoad>* decoders, std::vector<NodeLoad>* encoders,
             const std::function<int(const std::string& address, bool is_decoder)>& index_of) const;

 private:
  struct Count {
    int64_t requests = 0;
    int64_t tokens = 0;
  };
  // What finished on a node, oldest first; entries no later than the node's last poll are dropped
  // when it is applied.
  using Done = std::deque<std::pair<Clock::time_point, Count>>;
  static constexpr size_t kMaxDone = 4096;  // per node, for a node that stops being polled

  static Count DoneSincePoll(Done* done, const NodeLoad& n);
  static void Adjust(const Count* inflight, Done* done, NodeLoad& n);
  void Add(std::unordered_map<std::string, Count>& m, const std::string& node, int64_t requests, int64_t tokens) DS41_REQUIRES(mu_);
  static void AddDone(std::unordered_map<std::string, Done>& m, const std::string& node, Clock::time_point t,
                      int64_t requests, int64_t tokens);

  mutable Mutex mu_;
  std::unordered_map<std::string, Count> decoders_ DS41_GUARDED_BY(mu_), encoders_ DS41_GUARDED_BY(mu_);
  // Pruned by Apply, which is const to its callers.
  mutable std::unordered_map<std::string, Done> decoders_done_ DS41_GUARDED_BY(mu_), encoders_done_ DS41_GUARDED_BY(mu_);
};

}  // namespace ds41
