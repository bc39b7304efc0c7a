// EncoderCore: the encoder node's work without transport (MODEL.md §10.6 steps 1-2, §10.7). A
// prefill reads the cached prefix as units, finds the SWA state at its end (own pool, else the peer
// that holds it, else an encoder replay), encodes the uncached tokens in chunks that share forward
// passes with other prefills under a token budget, and returns the new global KV as units, the SWA
// state at the prompt's end and the decoder-replay handoff; the units also go to the cache service.
// A prefill whose caller gives up (its CancelToken) leaves the shared steps at the next step
// boundary; the full units it completed still go to the store, so a retry computes only the rest.
//
// Thread-safe: Prefill may be called from many threads; one scheduler thread runs the encoder steps,
// and mu_ guards the queue of prefills it shares them among.
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
#include "node_client/node_messages.h"
#include "serving/engine_prompt.h"
#include "serving/node_metrics.h"
#include "serving/prefix_loader.h"
#include "serving/swa_pool.h"
#include "serving/unit_persister.h"
#include "util/cancel_token.h"
#include "util/thread_annotations.h"

namespace ds41 {

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

  // CANCELLED when `cancel` (may be null) is cancelled before the prefill ends.
  StatusOr<PrefillOutput> Prefill(const PrefillInput& in, CancelToken* cancel = nullptr);

  int64_t queued_tokens() const;
  int64_t running() const;
  SwaPool* swa_pool() { return &swa_pool_; }  // served to peers by SwaStateService

 private:
  struct Pending {
    EncodeJob* job;
    CancelToken* cancel;  // may be null
    std::promise<Status> done;
  };
  void SchedulerLoop();
  // Ends every queued or active prefill whose caller cancelled it.
  void DropCancelledLocked() DS41_REQUIRES(mu_);
  // The full units of what a cancelled prefill had encoded, to the store.
  void KeepEncodedUnits(const PrefillInput& in, const SequenceState& st, int64_t H, int64_t encoded);
  // The SWA state at H: this node's pool, else the peer's, else an encoder replay; sets the source.
  Status RestoreSwa(const PrefillInput& in, int64_t H, EnginePrompt* prompt, SequenceState* st, PrefillOutput* out);

  const Model& model_;
  Engine engine_;
  SwaFetcher fetcher_;
  EncoderOptions opt_;
  NodeMetrics* metrics_;
  SwaPool swa_pool_;
  PrefixLoader loader_;
  UnitPersister persister_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending*> queue_ DS41_GUARDED_BY(mu_);
  std::vector<Pending*> active_ DS41_GUARDED_BY(mu_);
  bool stop_ DS41_GUARDED_BY(mu_) = false;
  std::thread scheduler_;
};

}  // namespace ds41
