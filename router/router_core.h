// RouterCore: one request from token ids to a stream of generated ids, without HTTP. It looks up the
// longest cached prefix in the store (the store is the index: every router replica sees the same
// hits), places the request (placement.h), calls the chosen decoder's Generate and streams its
// tokens to a sink. A request whose node dies before its first token is placed again without that
// node; one whose decoder dies after streaming part of the reply is migrated: placed again without
// it, from the same H, with the tokens already streamed sent as resumed tokens
// (GenerateInput::resumed), which the new decoder recomputes instead of sampling. Nothing is sent
// twice, and the client's stream goes on with the tokens an uninterrupted run would have produced
// (greedy or seeded) as long as the prefill can be redone as it was: the prefix units and the SWA
// state at H are still there (an encoder keeps a copy of the state it pulled from the decoder that
// held it, and the next attempt names that encoder when the holder is gone); else the encoder's
// bounded replay makes it approximate, as for any request. At most RouterOptions::max_migrations per request; past that, or with no
// decoder left, the request ends with its error after the tokens already sent. Sessions are bound
// to the decoder that served their last turn while it stays warm (a cost in placement, not a pin),
// and the router remembers who holds the SWA state at which position.
// Transport stays in node_client/: this class sees token ids, placements and Status.
// No thread is held while a request runs: Start checks and admits it on the caller's thread and
// starts the prefix lookup (CacheClient::LookupPrefixAsync); its answer places the first attempt on
// a gRPC thread, and each attempt is an asynchronous Generate call whose tokens and end arrive on
// gRPC's threads (continuations: lookup -> place -> tokens -> end -> done, or -> retry / migration,
// whose health poll and placement run on the `workers` pool). Admission counts from arrival (Admit).
// Thread-safe: mu_ guards the set of in-flight cancels; placing_mu_ makes each placement one step
// from the loads it reads to the work it adds; the session bindings, the placer and the in-flight
// counts lock their own.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache_client/cache_client.h"
#include "node_client/node_client.h"
#include "router/inflight_loads.h"
#include "router/node_table.h"
#include "router/placement.h"
#include "router/prediction_scale.h"
#include "router/router_metrics.h"
#include "router/session_bindings.h"
#include "util/cancel_token.h"
#include "util/thread_pool.h"
#include "util/mutex.h"
#include "util/task_group.h"
#include "util/thread_annotations.h"

namespace ds41 {

class RouterCore;

// A request's place among RouterOptions::max_running, from its arrival until its reply has ended
// (Release, or destruction, whichever comes first). Taken before a request is parsed, so the time it
// waits for a worker counts, and a request over the limit is refused at once.
class RouteAdmission {
 public:
  explicit RouteAdmission(RouterCore* core) : core_(core) {}
  RouteAdmission(const RouteAdmission&) = delete;
  RouteAdmission& operator=(const RouteAdmission&) = delete;
  ~RouteAdmission() { Release(); }
  void Release();  // idempotent
  // Something else held for the request's life (its tenant's place), given back with it (after
  // anything given before). REQUIRES: called before the admission is shared.
  void AlsoRelease(std::function<void()> release) {
    also_ = [before = std::move(also_), release = std::move(release)] {
      if (before) before();
      release();
    };
  }

 private:
  RouterCore* const core_;
  std::atomic<bool> released_{false};
  std::function<void()> also_;
};

struct RouteRequest {
  std::string request_id;
  std::string tenant_salt;          // namespaces the cache: tenants never see each other's hits
  std::string session_id;
  std::vector<int32_t> tokens;      // the prompt (image spans hold their key tokens)
  std::vector<PromptImage> images;  // the prompt's images, fitted to their plans, in order
  // What the decoder samples by; its stop ids end the reply, max_tokens counts over all attempts.
  GenerateSampling sampling = [] {
    GenerateSampling s;
    s.max_tokens = 256;
    return s;
  }();
  // The client's deadline (max: none given); the router caps it at RouterOptions::request_timeout.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::shared_ptr<CancelToken> cancel;  // client gone, stop string matched
  // When the request arrived (the front door's first look at it): TTFT, end-to-end time and the
  // deadline check count from here. Default (epoch): when Start is called.
  std::chrono::steady_clock::time_point arrival{};
  // Its place among max_running, taken on arrival (RouterCore::Admit); null: Start takes one.
  std::shared_ptr<RouteAdmission> admission;
};

struct RouteUsage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;        // prompt tokens whose KV was reused (prompt_cache_hit_tokens)
  int64_t computed_tokens = 0;      // prompt tokens the encoder computed
  int64_t encoder_replay_tokens = 0, decoder_replay_tokens = 0;
  std::string prefix_source, swa_source;
  double ttft_seconds = 0;          // as the router saw it
  double predicted_ttft_seconds = 0;
};

// usage.completion_tokens counts every token the sink got, over all attempts; the cache and compute
// figures are the last attempt's (a migrated attempt prefills the same prompt from the same H).
struct RouteResult {
  Status status;
  std::string finish_reason;        // stop | length | cancelled
  RouteUsage usage;
  Placement placement;              // the last attempt's
  std::string swa_hint;             // the node named as holding the SWA state at H ("" none)
  int attempts = 0;                 // decoder calls made: first, retries, migrations
  int migrations = 0;               // of them, resumed after a decoder died mid-stream
  int retry_after_s = 0;            // a refusal for overload: seconds until the queue is predicted to fit
};

// Receives generated ids (and their log-probabilities when asked) as they arrive; returning false
// stops generation (finish_reason "stop"). Called on gRPC's threads, one batch at a time: no blocking.
using TokenSink = std::function<bool(const GeneratedTokens& tokens)>;
// Gets the request's end, once, after its last sink call (on the caller's thread when it ends before
// any call is made, else on a gRPC or worker thread). Must not block or throw.
using RouteDone = std::function<void(RouteResult result)>;

struct RouterOptions {
  std::string fingerprint;
  int unit_tokens = 64;
  int window = 128;
  int max_attempts = 3;              // decoder calls per request before its first token
  int max_migrations = 2;            // resumptions per request after its decoder died mid-stream (0: none)
  int max_running = 256;            // back-pressure: beyond this, RESOURCE_EXHAUSTED
  // Overload: a new request whose predicted wait behind queued work (Placement::queue_seconds,
  // scaled by how much longer first tokens have lately taken than predicted: PredictionScale)
  // exceeds this is refused with RESOURCE_EXHAUSTED and a retry-after hint, so the requests admitted
  // keep a bounded time to first token however much is offered (0: never refused for it). 8 s: at
  // sustained load the bound must not fire (an hour's soak at 80 % of capacity refused 26 % of its
  // requests with 2 s; their predicted waits were at most 5.8 s at p99, none above 8 s); an operator
  // who wants the TTFT objective's goodput under overload sets it (2 s: docs/benchmarks.md).
  double max_queue_seconds = 8;
  size_t max_sessions = 100000;     // session bindings remembered (least recently used dropped)
  std::chrono::seconds request_timeout{600};  // a request's deadline when its client gives none (and the longest)
  PlacerOptions placement;         // the policy (--placement) and the cost model's starting rates
};

class RouterCore {
 public:
  // `workers` runs a retry's or a migration's health poll and placement (which block on RPCs);
  // nullptr: they run on the gRPC thread that saw the attempt end (tests).
  RouterCore(RouterOptions options, NodeTable* nodes, CacheClient* cache, const NodeClient* node_client,
             RouterMetrics* metrics, ThreadPool* workers = nullptr);

  // Admission on arrival: a place among max_running, or UNAVAILABLE (draining) or
  // RESOURCE_EXHAUSTED (full; counted in ds41_router_rejections_total{reason="overloaded"}).
  StatusOr<std::shared_ptr<RouteAdmission>> Admit();

  // Routes `request`: its prefix lookup and first placement on this thread, then no thread is held
  // until `done`. Every path ends in exactly one `done` call.
  void Start(RouteRequest request, TokenSink sink, RouteDone done);
  // Start waited for on this thread (tests and tools).
  RouteResult Generate(const RouteRequest& request, const TokenSink& sink);

  // Shutdown: new requests are refused (UNAVAILABLE) from Drain on; WaitIdle waits until none is in
  // flight or `deadline`, and CancelAll stops what is left at its next step.
  void Drain() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const;
  void CancelAll(CancelReason reason);

  const RouterOptions& options() const { return opt_; }
  const Placer& placer() const { return placer_; }

 private:
  friend class RouteAdmission;
  struct Call;  // one request's state across its continuations (router_core.cc)
  // The healthy nodes not excluded, each decoder marked warm when it holds this session up to H;
  // their loads as polled (placing_mu_'s holder adds this router's in-flight work).
  struct Candidates {
    std::vector<NodeLoad> decoders, encoders;
    std::string bound;        // the decoder this router bound the session to at H
    std::string warm_holder;  // a decoder that reports the session warm at H
  };
  Candidates FindCandidates(const RouteRequest& rq, int64_t H, const std::set<std::string>& excluded) const;
  // What the client has been sent so far, over every attempt.
  struct Streamed {
    std::vector<int32_t> ids;                      // every id passed to the sink, in order
    std::chrono::steady_clock::time_point last{};  // when the latest arrived
  };
  // The call for placement `p`; a migration's carries `streamed` as resumed tokens.
  GenerateInput BuildInput(const RouteRequest& rq, const CacheNamespace& ns, int64_t H, const Placement& p,
                           const std::string& swa_peer, std::chrono::steady_clock::time_point deadline,
                           const Streamed& streamed) const;
  // kNodeLost: the decoder (or its encoder) went away: the call failed UNAVAILABLE or UNKNOWN, or was
  // cancelled by the node, not by us; `res->status` holds why.
  enum class Attempt { kDone, kNodeLost, kFailed };
  // The continuations. Next places an attempt and starts its call (or ends the request); OnTokens
  // passes a batch to the sink; AttemptEnded judges the call's end (fills res's status, finish and
  // usage) and ends the request or hands AfterNodeLost to the workers; Finish releases the request
  // and calls done.
  void Next(const std::shared_ptr<Call>& c);
  bool OnTokens(Call& c, const GeneratedTokens& tokens);
  void AttemptEnded(const std::shared_ptr<Call>& c, const GenerateCallResult& call);
  Attempt JudgeAttempt(Call& c, const GenerateCallResult& call);
  void AfterNodeLost(const std::shared_ptr<Call>& c);
  void Finish(const std::shared_ptr<Call>& c);
  // The reply ended with the tokens already streamed (its last a stop id, or max_tokens reached):
  // the finish reason, or "" when there is more to generate.
  static std::string EndedBy(const RouteRequest& rq, const Streamed& streamed);
  // Placement of one attempt: fills res->placement, or res->status when none is possible; once
  // placed, the attempt is counted in flight (RunAttempt ends it).
  // `count_rejection`: a refusal counts in ds41_router_rejections_total (not for a migration, whose
  // request was admitted and has been streaming). `swa_fallback` ("" none) is named as the SWA-state
  // holder when the usual one is excluded or unknown.
  bool PlaceAttempt(const RouteRequest& rq, int64_t H, const std::set<std::string>& excluded,
                    std::chrono::steady_clock::time_point deadline, bool count_rejection,
                    const std::string& swa_fallback, RouteResult* res);
  // After a node went away: who is gone (a poll says), else the decoder.
  void ExcludeFailed(const Placement& p, std::set<std::string>* excluded);
  void RecordEnd(const RouteResult& res, std::chrono::steady_clock::time_point t0);
  // SessionBindings::Bind, and the gauge of sessions remembered.
  void BindSession(const std::string& session, const std::string& decoder, int64_t decoder_end,
                   const std::string& encoder, int64_t encoder_end);
  void EndRunning();  // one request fewer in flight; wakes WaitIdle

  RouterOptions opt_;
  NodeTable* nodes_;
  CacheClient* cache_;
  const NodeClient* node_client_;
  RouterMetrics* metrics_;
  ThreadPool* workers_;
  std::atomic<int> running_{0};
  std::atomic<bool> draining_{false};
  Placer placer_;
  InflightLoads inflight_;
  PredictionScale prediction_scale_;  // overload shedding judges queue waits by what requests saw
  SessionBindings bindings_;

  // One placement at a time, from the in-flight loads it reads to the work it adds to them:
  // otherwise requests placed at once all read the same idle loads, pile onto one node, and the
  // overload check admits each of them (seen as two long prompts both sent to one encoder).
  Mutex placing_mu_;
  mutable Mutex mu_;
  std::set<std::shared_ptr<CancelToken>> inflight_cancels_ DS41_GUARDED_BY(mu_);  // for CancelAll
  mutable CondVar idle_cv_;  // notified when running_ falls to 0
  // Prefix lookups whose answer is still to place its request (Hold/Release); last, so destroyed
  // first: it waits for them, as WaitIdle does for the requests (CancelAll cancels their lookups).
  TaskGroup lookups_{nullptr};
};

}  // namespace ds41
