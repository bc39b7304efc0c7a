// InflightLoads: the work this router has sent to each node and not yet seen done. Node polls come
// once a second; between two of them a burst would find every node's load unchanged and pile onto
// the one that looked idle. Placement sees, per node, the larger of the polled load and this
// router's own count (with several router replicas each still sees at least its own work).
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <mutex>
#include <string>
#include <vector>

#include "router/placement.h"
#include "util/thread_annotations.h"

namespace ds41 {

class InflightLoads {
 public:
  // The request was sent as placed: its decoder holds one more sequence, its encoder (if any) the
  // request's uncached tokens until the first token comes back.
  void Started(const Placement& p);
  void Prefilled(const Placement& p);  // first token: the encoder's share is done
  void Ended(const Placement& p, bool prefilled);

  // Raises each node's polled load to at least what this router has in flight on it.
  void Apply(std::vector<NodeLoad>* decoders, std::vector<NodeLoad>* encoders) const;
  // The same, walking the in-flight counts instead of the candidates: for callers that can find a
  // candidate by address without hashing it (a simulator with 1,000 candidates per placement).
  // index_of(address, is_decoder): the candidate's position in its vector, or -1 when none.
  void Apply(std::vector<NodeLoad>* decoders, std::vector<NodeLoad>* encoders,
             const std::function<int(const std::string& address, bool is_decoder)>& index_of) const;

 private:
  struct Count {
    int64_t requests = 0;
    int64_t tokens = 0;
  };
  static void ApplyDecoder(const Count& c, NodeLoad& d);
  static void ApplyEncoder(const Count& c, NodeLoad& e);
  void Add(std::unordered_map<std::string, Count>& m, const std::string& node, int64_t requests, int64_t tokens) DS41_REQUIRES(mu_);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Count> decoders_ DS41_GUARDED_BY(mu_), encoders_ DS41_GUARDED_BY(mu_);
};

}  // namespace ds41
