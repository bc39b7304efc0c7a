// PrefixKeys: the identity of each prefix [0, n) of a workload request's prompt, from its blocks
// rather than its tokens. WorkloadTokens (trace/workload.h) makes a block's i-th token a function of
// the block's id and i, so two prompts agree on [0, n) exactly when they have the same ids for the
// blocks that [0, n) touches: one hash per block, no token ids in memory. The keys stand where the
// real system hashes tokens (the store's unit chain, PrefixChain for prefix affinity): equal keys
// mean equal prefixes, as there (sim_test checks the two agree on real workload tokens).
#pragma once

#include <cstdint>
#include <vector>

#include "trace/workload.h"

namespace ds41::sim {

class PrefixKeys {
 public:
  PrefixKeys() = default;
  // `salt` separates namespaces (0 for the workload's prompts).
  explicit PrefixKeys(const WorkloadRequest& r, uint64_t salt = 0);

  int64_t tokens() const { return tokens_; }
  // The identity of [0, n); REQUIRES: 1 <= n <= tokens(). At(0) is the namespace root.
  uint64_t At(int64_t n) const;
  // The unit-hash chain of [0, tokens() - 1) in whole units of `unit`, as PrefixChain counts it
  // (the last prompt token is always computed): At(unit), At(2 unit), ...
  std::vector<uint64_t> Chain(int unit) const;

 private:
  int64_t tokens_ = 0;
  int block_tokens_ = 1;
  uint64_t root_ = 0;
  std::vector<uint64_t> chain_;  // chain_[j]: hash of the ids of blocks 0..j
};

// The number of leading tokens two prompts of one workload agree on: the blocks with equal ids from
// the start, up to the end of the shorter prompt (a block's tokens depend on its id alone).
int64_t CommonPrefix(const WorkloadRequest& x, const WorkloadRequest& y);

// splitmix64's finalizer.
inline uint64_t MixKey(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace ds41::sim
