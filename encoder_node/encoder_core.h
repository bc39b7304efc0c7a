// EncoderCore: the encoder node's work without transport (MODEL.md §10.6 steps 1-2, §10.7). A
// prefill reads the cached prefix as units, finds the SWA state at its end (own pool, else the peer
// that holds it, else an encoder replay), encodes the uncached tokens in chunks that share forward
// passes with other prefills under a token budget, and returns the new global KV as units, the SWA
// state at the prompt's end and the decoder-replay handoff; the units also go to the cache service.
// A prefill whose caller gives up (its CancelToken) leaves the shared steps at the next step
// boundary; the full units it completed still go to the store, so a retry computes only the rest.
//
// No thread waits for a prefill: its own work (the prefix read, the SWA state, the units built at
// the end) runs on the `requests` pool, the shared steps on the scheduler thread, and the answer goes
// to a callback. At most EncoderOptions::max_admitted prefills hold state at once; later ones wait
// in a queue holding nothing but their input.
//
// Thread-safe: PrefillAsync and Prefill may be called from many threads; one scheduler thread runs
// the encoder steps, and mu_ guards the queue of prefills it shares them among; admit_mu_ the
// admission count and the prefills waiting for it.
#pragma once

#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache_client/cache_client.h"
#include "engine/engine.h"
#include "node_client/node_messages.h"
#include "serving/engine_prompt.h"
#include "serving/node_executors.h"
#include "serving/node_metrics.h"
#include "serving/prefix_loader.h"
#include "serving/swa_pool.h"
#include "serving/unit_persister.h"
#include "util/cancel_token.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"
#include "util/thread_pool.h"

namespace ds41 {

// Fetches a serialized SWA state from a peer node (transport injected by the service).
using SwaFetcher = std::function<StatusOr<std::string>(const std::string& peer, const UnitKey& ns,
                                                       const UnitKey& prefix_key, int64_t position)>;

struct EncoderOptions {
  int64_t step_tokens = 512;               // token budget of one shared forward step
  uint64_t swa_pool_bytes = 2ull << 30;
  int64_t swa_ttl_ms = 10 * 60 * 1000;
  int max_admitted = 64;                   // prefills holding state (a loaded prefix, an encode job) at once
};

class EncoderCore {
 public:
  // The engine's kernels run on `pools.compute`, each prefill's own work on `pools.requests`, unit
  // puts on `pools.io` (serving/node_executors.h); the pools outlive the core.
  EncoderCore(const Model& model, CacheClient* cache, SwaFetcher fetcher, EncoderOptions options, NodeMetrics* metrics,
              const NodeExecutors& pools);
  ~EncoderCore();  // fails what is queued (UNAVAILABLE) and waits for every prefill's answer

  using PrefillDone = std::function<void(StatusOr<PrefillOutput>)>;
  // Starts a prefill and returns; `done` gets its outcome once, on a `requests` thread (or the
  // scheduler's, with an inline pool); it must not block. CANCELLED when `cancel` (may be null) is
  // cancelled before the prefill ends.
  void PrefillAsync(PrefillInput in, std::shared_ptr<CancelToken> cancel, PrefillDone done);
  // PrefillAsync waited for on this thread.
  StatusOr<PrefillOutput> Prefill(const PrefillInput& in, CancelToken* cancel = nullptr);

  int64_t queued_tokens() const;
  int64_t running() const;
  SwaPool* swa_pool() { return &swa_pool_; }  // served to peers by SwaStateService

 private:
  struct Prefilling;  // one prefill from its start to its answer (encoder_core.cc)
  // The prefill's own work up to its encode job (Prepare), which then joins the scheduler's queue.
  void Begin(const std::shared_ptr<Prefilling>& p);
  Status Prepare(Prefilling& p);
  // The scheduler is done with its job (`s`: how it ended): the rest runs on the requests pool.
  void Encoded(std::shared_ptr<Prefilling> p, Status s);
  // The units, the SWA state and the handoff of an encoded prompt.
  StatusOr<PrefillOutput> Finish(Prefilling& p);
  // Hands the outcome to the caller and gives the prefill's admission to the next waiting one.
  void Complete(const std::shared_ptr<Prefilling>& p, StatusOr<PrefillOutput> out);
  void SchedulerLoop();
  // Takes every queued or active prefill whose caller cancelled it out, into `ended`.
  void DropCancelledLocked(std::vector<std::pair<std::shared_ptr<Prefilling>, Status>>* ended) DS41_REQUIRES(mu_);
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
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::shared_ptr<Prefilling>> queue_ DS41_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Prefilling>> active_ DS41_GUARDED_BY(mu_);
  bool stop_ DS41_GUARDED_BY(mu_) = false;
  ThreadPool* requests_;
  Mutex admit_mu_;
  CondVar admit_cv_;  // notified when admitted_ falls to 0
  int admitted_ DS41_GUARDED_BY(admit_mu_) = 0;
  std::deque<std::shared_ptr<Prefilling>> waiting_ DS41_GUARDED_BY(admit_mu_);  // started, not yet admitted
  bool closing_ DS41_GUARDED_BY(admit_mu_) = false;  // the destructor runs: no new admission
  std::thread scheduler_;
};

}  // namespace ds41
