// EncoderCore: the encoder node's work without transport (MODEL.md §10.6 steps 1-2, §10.7). A
// prefill reads the cached prefix as units, finds the SWA state at its end (own pool, else the peer
// that holds it, else an encoder replay), encodes the uncached tokens in chunks that share forward
// passes with other prefills under a token budget, and returns the new global KV as units, the SWA
// state at the prompt's end and the decoder-replay handoff; the units also go to the cache service.
//
// Thread-safe: Prefill may be called from many threads; one scheduler thread runs the encoder steps.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache_client/cache_client.h"
#include "engine/engine.h"
#include "serving/node_metrics.h"
#include "serving/swa_pool.h"
#include "unit/state_units.h"

namespace ds41 {

struct PrefillInput {
  UnitKey ns{};                    // cache namespace root (tenant)
  std::vector<int32_t> tokens;     // the prompt [0, N)
  int64_t cached_tokens = 0;       // H
  std::string swa_peer;            // who may hold the SWA state at H
  int unit_tokens = kDefaultUnitTokens;
};

struct PrefillOutput {
  std::vector<BuiltUnit> units;    // [unit boundary below H, N)
  std::string swa;                 // SWA state at N
  std::string handoff;             // SerializeHandoff
  int64_t cached_tokens = 0;       // H used
  int64_t computed_tokens = 0;
  int64_t replay_tokens = 0;
  std::string swa_source;          // none | local | peer | replay
};

// Fetches a serialized SWA state from a peer node (transport injected by the service).
using SwaFetcher = std::function<StatusOr<std::string>(const std::string& peer, const UnitKey& ns,
                                                       const UnitKey& prefix_key, int64_t position)>;

struct EncoderOptions {
  int64_t step_tokens = 512;               // token budget of one shared forward step
  uint64_t swa_pool_bytes = 2ull << 30;
  int64_t swa_ttl_ms = 10 * 60 * 1000;
};

class EncoderCore {
 public:
  EncoderCore(const Model& model, CacheClient* cache, SwaFetcher fetcher, EncoderOptions options, NodeMetrics* metrics,
              ThreadPool* compute);
  ~EncoderCore();

  StatusOr<PrefillOutput> Prefill(const PrefillInput& in);
  std::optional<std::string> GetSwa(const UnitKey& ns, const UnitKey& prefix_key);

  int64_t queued_tokens() const;
  int64_t running() const;
  uint64_t swa_pool_bytes() const { return swa_pool_.bytes(); }

 private:
  struct Pending {
    EncodeJob* job;
    std::promise<Status> done;
  };
  void SchedulerLoop();
  // Global KV of [0, H) from the cache; returns the H it could assemble.
  int64_t LoadPrefix(const PrefillInput& in, SequenceState* st);

  const Model& model_;
  Engine engine_;
  CacheClient* cache_;
  SwaFetcher fetcher_;
  EncoderOptions opt_;
  NodeMetrics* metrics_;
  SwaPool swa_pool_;
  std::unique_ptr<ThreadPool> io_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending*> queue_;
  std::vector<Pending*> active_;
  bool stop_ = false;
  std::thread scheduler_;
};

// "ns|prefix" key of an SWA state in a pool.
std::string SwaPoolKey(const UnitKey& ns, const UnitKey& prefix_key);

}  // namespace ds41
