#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <unordered_map>

#include "sim/decoder_model.h"
#include "sim/encoder_model.h"
#include "sim/event_queue.h"
#include "sim/host_cpu.h"
#include "sim/kv_store.h"
#include "sim/prefix_keys.h"
#include "sim/sim_router.h"
#include "sim/warm_directory.h"

namespace ds41::sim {

const char* CacheScopeName(CacheScope s) { return s == CacheScope::kShared ? "shared" : "per-node"; }

Status ValidateSimOptions(const SimOptions& o) {
  if (o.encoders < 1 || o.decoders < 1) return InvalidArgumentError("at least one encoder and one decoder");
  if (o.unit_tokens < 2 || o.unit_tokens % 2) return InvalidArgumentError("--unit-tokens must be even and >= 2");
  if (!(o.poll_s > 0)) return InvalidArgumentError("--poll-ms must be > 0");
  if (o.concurrency < 1) return InvalidArgumentError("--concurrency must be >= 1");
  if (!(o.deadline_s > 0)) return InvalidArgumentError("--deadline must be > 0");
  if (o.router_workers < 1) return InvalidArgumentError("--router-workers must be >= 1");
  if (o.router_max_running < 1) return InvalidArgumentError("--router-max-running must be >= 1");
  if (!(o.router_max_queue_s >= 0)) return InvalidArgumentError("--router-max-queue-seconds must be >= 0");
  if (!(o.router_timeout_s > 0)) return InvalidArgumentError("--router-timeout must be > 0");
  return Status::Ok();
}

namespace {

// The driver's events (the node models and the host CPU have their own sinks).
enum Kind : uint32_t {
  kArrive,
  kDeadline,
  kRoute,        // the request overhead has passed: the router decides
  kDecFetched,   // the decoder's prefix bytes arrived
  kDecLoaded,    // ... and are decoded: the prefill call goes out
  kEncFetched,   // the encoder's prefix bytes (and a peer's SWA state) arrived
  kEncReady,     // ... loaded and the SWA state restored or replayed: the prefill queues
  kHandoffDone,  // the prefill's KV reached the decoder
  kFirstToken,   // decoder replay done
  kStreamEnd,    // the generated units are stored: the stream ends
  kPoll,
};

enum class Phase : uint8_t { kNone, kWaitClient, kWaitRouter, kOverhead, kAdmission, kEncoderQueued, kDecoding, kFinishing, kDone };

struct Req {
  Phase phase = Phase::kNone;
  bool cancelled = false, admitted = false, inflight = false, prefilled = false;
  bool router_admitted = false;  // counted in the router's max_running (from arrival to the end)
  bool holds_worker = false;     // a router worker checks, tokenizes and places it (not while it streams)
  bool refused_on_arrival = false;  // over the router's max_running when it arrived
  int32_t session = -1;
  PrefixKeys keys;
  RouteDecision route;
  KvStore* cache = nullptr;  // where this request's prefix comes from and its units go
  int64_t H = 0;             // cached tokens as served (the node's reach)
  int64_t encoder_replay = 0, decoder_replay = 0;
  int enc_job = -1, dec_seq = -1;
  double start = -1, route_t = 0, first_t = -1, last_t = 0;
  int64_t generated = 0;
  std::string prefix_source;
  std::vector<double> itl;
};

class Simulation final : public EventSink, public EncoderModel::Listener, public DecoderModel::Listener {
 public:
  Simulation(const std::vector<WorkloadRequest>& w, const RateProfile& p, const SimOptions& o,
             const std::function<void(const RequestRecord&)>& on_record)
      : w_(w),
        p_(p),
        o_(o),
        on_record_(on_record),
        cpu_(&q_, p.host_cores),
        store_(p.store, p.network, p.kv_bytes_per_token, o.unit_tokens),
        reqs_(w.size()),
        records_(w.size()) {
    // At most what every request writes: its prompt's full units and a tail, its reply's units.
    int64_t units = 0;
    for (const WorkloadRequest& r : w)
      units += r.prompt_tokens / o.unit_tokens + 1 + (r.output_tokens + o.unit_tokens - 1) / o.unit_tokens + 1;
    if (o.scope == CacheScope::kShared) store_.Reserve(units);
    std::unordered_map<std::string, int32_t> ids;
    for (size_t i = 0; i < w.size(); ++i) {
      if (w[i].session.empty()) continue;
      reqs_[i].session = ids.try_emplace(w[i].session, static_cast<int32_t>(ids.size())).first->second;
    }
    warm_ = std::make_unique<WarmDirectory>(ids.size());
    SimRouterOptions ro;
    ro.placer.policy = o.policy;
    ro.placer.seed = o.seed ? o.seed : 1;
    if (o.cost) ro.placer.cost = *o.cost;
    ro.unit_tokens = o.unit_tokens;
    ro.window = p.window;
    ro.max_sessions = o.max_sessions;
    ro.max_queue_seconds = o.router_max_queue_s;
    router_ = std::make_unique<SimRouter>(ro, o.decoders, o.encoders, warm_.get());
    for (int i = 0; i < o.encoders; ++i) {
      encoders_.push_back(std::make_unique<EncoderModel>(i, &q_, &cpu_, &p_, this));
      if (o.scope == CacheScope::kPerNode) {
        StoreRates local = p.store;
        local.capacity_bytes = p.node_cache_bytes;
        local.shards = 1;
        node_caches_.push_back(std::make_unique<KvStore>(local, p.network, p.kv_bytes_per_token, o.unit_tokens));
      }
    }
    for (int i = 0; i < o.decoders; ++i) decoders_.push_back(std::make_unique<DecoderModel>(i, &q_, &cpu_, &p_, warm_.get(), this));
  }

  SimResult Run() {
    // Arrivals are chained (each schedules the next) and deadlines kept in arrival order, so the
    // heap holds only what is in flight.
    if (!w_.empty()) q_.At(w_[0].arrival_s, this, kArrive, 0);
    Poll();
    const auto t0 = std::chrono::steady_clock::now();
    while (q_.Step()) {
    }
    SimResult r;
    r.facts.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.facts.events = q_.processed();
    r.facts.simulated_s = last_end_;
    r.facts.place_s = std::move(place_s_);
    r.facts.attempt_s = std::move(attempt_s_);
    r.facts.store_bytes = store_.bytes();
    r.facts.store_units = store_.units();
    r.facts.store_evicted = store_.evicted_capacity() + store_.evicted_ttl();
    for (const auto& c : node_caches_) {
      r.facts.store_bytes += c->bytes();
      r.facts.store_units += c->units();
      r.facts.store_evicted += c->evicted_capacity() + c->evicted_ttl();
    }
    for (const auto& e : encoders_) r.facts.encoder_steps += e->steps();
    r.facts.cpu_work_s = cpu_.work_done_s();
    for (const auto& d : decoders_) {
      r.facts.decoder_steps += d->steps();
      r.facts.cpu_work_s += d->planned_work_s();
    }
    r.records = std::move(records_);
    return r;
  }

  void OnEvent(uint32_t kind, uint64_t a, uint64_t) override {
    const size_t i = static_cast<size_t>(a);
    switch (kind) {
      case kArrive: Arrive(i); break;
      case kDeadline: Deadlines(); break;
      case kRoute: Route(i); break;
      case kDecFetched: DecFetched(i); break;
      case kDecLoaded: DecLoaded(i); break;
      case kEncFetched: EncFetched(i); break;
      case kEncReady: EncReady(i); break;
      case kHandoffDone: HandoffDone(i); break;
      case kFirstToken: FirstToken(i); break;
      case kStreamEnd: StreamEnd(i); break;
      case kPoll: Poll(); break;
    }
  }

  void OnPrefilled(int encoder, uint64_t request) override;
  void OnToken(int decoder, uint64_t request, double t) override;

 private:
  int64_t N(size_t i) const { return w_[i].prompt_tokens; }
  EncoderModel& Enc(const Req& r) { return *encoders_[static_cast<size_t>(r.route.encoder)]; }
  DecoderModel& Dec(const Req& r) { return *decoders_[static_cast<size_t>(r.route.decoder)]; }
  double Transfer(uint64_t bytes) const {
    return static_cast<double>(bytes) / p_.network.link_bytes_per_s + p_.network.latency_s;
  }

  void Arrive(size_t i);
  void Send(size_t i);
  void Deadline(size_t i);
  void Deadlines();  // every deadline due now, then the next one armed
  void ArmDeadline();
  void Route(size_t i);
  void DecFetched(size_t i);
  void DecLoaded(size_t i);
  void EncFetched(size_t i);
  void EncReady(size_t i);
  void HandoffDone(size_t i);
  void FirstToken(size_t i);
  void Finish(size_t i);
  void StreamEnd(size_t i);
  void Poll();
  // An admission phase event found its request given up: the decoder stops counting it.
  bool AbandonedInAdmission(size_t i);
  // The end of request i: the record, the client slot, the router worker.
  void End(size_t i, std::string_view outcome, int http_status, std::string error);
  void ReleaseWorker();
  void ReleaseClient();

  const std::vector<WorkloadRequest>& w_;
  const RateProfile p_;
  const SimOptions o_;
  const std::function<void(const RequestRecord&)>& on_record_;
  EventQueue q_;
  HostCpu cpu_;
  KvStore store_;
  std::vector<std::unique_ptr<KvStore>> node_caches_;  // per-node scope: one per encoder
  std::unique_ptr<WarmDirectory> warm_;
  std::unique_ptr<SimRouter> router_;
  std::vector<std::unique_ptr<EncoderModel>> encoders_;
  std::vector<std::unique_ptr<DecoderModel>> decoders_;
  std::vector<Req> reqs_;
  std::vector<RequestRecord> records_;
  std::deque<size_t> client_queue_, router_queue_;
  std::deque<size_t> deadlines_;  // arrival order = deadline order
  bool deadline_armed_ = false;
  int clients_ = 0, workers_ = 0, router_running_ = 0;
  size_t ended_ = 0;
  double last_end_ = 0;
  std::vector<double> place_s_, attempt_s_;
};

void Simulation::Arrive(size_t i) {
  Req& r = reqs_[i];
  if (i + 1 < w_.size()) q_.At(w_[i + 1].arrival_s, this, kArrive, i + 1);
  deadlines_.push_back(i);
  ArmDeadline();
  if (clients_ < o_.concurrency) {
    Send(i);
  } else {
    r.phase = Phase::kWaitClient;
    client_queue_.push_back(i);
  }
}

void Simulation::Send(size_t i) {
  Req& r = reqs_[i];
  ++clients_;
  r.start = q_.now();
  // The router admits a request as it arrives (RouterCore::Admit), before it waits for a worker:
  // over its limit the answer is 429 at once.
  // (Answered as an event of its own: ending it here would send the next waiting request from
  // within this one, recursively.)
  if (router_running_ >= o_.router_max_running) {
    r.phase = Phase::kOverhead;
    r.refused_on_arrival = true;
    q_.After(0, this, kRoute, i);
    return;
  }
  ++router_running_;
  r.router_admitted = true;
  if (workers_ < o_.router_workers) {
    ++workers_;
    r.holds_worker = true;
    r.phase = Phase::kOverhead;
    q_.After(p_.request_overhead_s, this, kRoute, i);
  } else {
    r.phase = Phase::kWaitRouter;
    router_queue_.push_back(i);
  }
}

void Simulation::ReleaseClient() {
  --clients_;
  while (!client_queue_.empty() && clients_ < o_.concurrency) {
    const size_t j = client_queue_.front();
    client_queue_.pop_front();
    // One whose deadline is now is never sent (the replay's check); its deadline ends it.
    if (reqs_[j].phase == Phase::kWaitClient && w_[j].arrival_s + o_.deadline_s > q_.now()) Send(j);
  }
}

void Simulation::ReleaseWorker() {
  --workers_;
  while (!router_queue_.empty() && workers_ < o_.router_workers) {
    const size_t j = router_queue_.front();
    router_queue_.pop_front();
    if (reqs_[j].phase != Phase::kWaitRouter) continue;
    ++workers_;
    reqs_[j].holds_worker = true;
    reqs_[j].phase = Phase::kOverhead;
    q_.After(p_.request_overhead_s, this, kRoute, j);
  }
}

void Simulation::Route(size_t i) {
  Req& r = reqs_[i];
  if (r.cancelled) return;
  const WorkloadRequest& wr = w_[i];
  r.route_t = q_.now();
  if (r.refused_on_arrival) {
    End(i, kOutcomeRejected, 429, "the router has " + std::to_string(o_.router_max_running) + " requests in flight");
    return;
  }
  // Placed (below) and streaming from here on: no router thread waits for it.
  if (r.holds_worker) {
    r.holds_worker = false;
    ReleaseWorker();
  }
  r.keys = PrefixKeys(wr);
  // The router's lookup: the store is the index (shared scope); without one the router knows no H.
  const int64_t H = o_.scope == CacheScope::kShared ? store_.Lookup(r.keys, N(i) - 1, q_.now()) : 0;
  std::vector<uint64_t> chain;
  if (o_.policy == PlacementPolicy::kPrefixAffinity) chain = r.keys.Chain(o_.unit_tokens);
  r.route = router_->Route(wr.session, r.session, N(i), H, std::move(chain), r.start + o_.router_timeout_s - q_.now());
  place_s_.push_back(r.route.place_seconds);
  attempt_s_.push_back(r.route.attempt_seconds);
  switch (r.route.refusal) {
    case AttemptRefusal::kNone: break;
    case AttemptRefusal::kDeadline:  // DEADLINE_EXCEEDED: the router's 504, a failure to the replay
      End(i, kOutcomeFailed, 504, r.route.message);
      return;
    case AttemptRefusal::kDecodersFull:
    case AttemptRefusal::kQueue:  // 429 with Retry-After
      End(i, kOutcomeRejected, 429, r.route.message);
      return;
  }
  router_->inflight().Started(r.route.placement);
  r.inflight = true;
  DecoderModel& d = Dec(r);
  if (!d.TryAdmit()) {
    End(i, kOutcomeRejected, 429, "decoder: " + std::to_string(p_.decoder.max_running) + " sequences already running");
    return;
  }
  r.admitted = true;
  r.phase = Phase::kAdmission;
  r.cache = o_.scope == CacheScope::kShared ? &store_ : node_caches_[static_cast<size_t>(r.route.encoder)].get();
  // Per-node scope: the hit is whatever the chosen encoder's own cache holds.
  r.H = o_.scope == CacheScope::kShared ? H : r.cache->Lookup(r.keys, N(i) - 1, q_.now());
  // DecoderCore::Admit: the session's warm state when it covers the unit boundary below H and
  // agrees with the prompt there, else the prefix from the cache.
  const int64_t U = o_.unit_tokens;
  const int64_t boundary = r.H / U * U;
  bool warm = false;
  if (r.session >= 0) {
    warm = d.TakeWarm(r.session, N(i), boundary, [&](const WarmTurn& t) {
             // The warm context is that turn's prompt, then its reply: the new prompt agrees on
             // [0, boundary) only within the old prompt's part of it.
             return boundary == 0 || (boundary <= t.prompt_tokens && CommonPrefix(w_[static_cast<size_t>(t.request)], wr) >= boundary);
           }).has_value();
  }
  r.prefix_source = warm ? "warm" : (boundary > 0 ? "cache" : "none");
  if (!warm && boundary > 0) {
    const StoreTransfer t = r.cache->Read(r.keys, boundary, q_.now());
    if (t.reach < boundary) r.H = t.reach;  // lost units: ask the encoder for less
    q_.At(t.done_at, this, kDecFetched, i, static_cast<uint64_t>(t.reach));
  } else {
    DecLoaded(i);
  }
}

bool Simulation::AbandonedInAdmission(size_t i) {
  Req& r = reqs_[i];
  if (!r.cancelled) return false;
  if (r.admitted) {
    Dec(r).Abandon();
    r.admitted = false;
  }
  return true;
}

void Simulation::DecFetched(size_t i) {
  if (AbandonedInAdmission(i)) return;
  cpu_.Run(p_.decoder.load_token_s * static_cast<double>(reqs_[i].H / o_.unit_tokens * o_.unit_tokens), this, kDecLoaded, i);
}

void Simulation::DecLoaded(size_t i) {
  if (AbandonedInAdmission(i)) return;
  Req& r = reqs_[i];
  // EncoderCore::Prefill: the prefix it attends to from the cache, then the SWA state at H from its
  // own pool, else from the peer the router named, else an encoder replay.
  double ready = q_.now();
  if (r.H > 0) {
    const int64_t known = r.prefix_source == "cache" ? r.H / o_.unit_tokens * o_.unit_tokens : 0;
    const StoreTransfer t = r.cache->Read(r.keys, r.H, q_.now(), known);
    r.H = t.reach;
    ready = t.done_at;
  }
  r.encoder_replay = 0;
  if (r.H > 0) {
    const uint64_t key = r.keys.At(r.H);
    bool restored = Enc(r).swa_pool().Find(key, q_.now()) != nullptr;
    if (!restored) {
      ByteLru<char>* peer = nullptr;
      if (r.route.swa_peer_encoder >= 0 && r.route.swa_peer_encoder < o_.encoders)
        peer = &encoders_[static_cast<size_t>(r.route.swa_peer_encoder)]->swa_pool();
      if (r.route.swa_peer_decoder >= 0 && r.route.swa_peer_decoder < o_.decoders)
        peer = &decoders_[static_cast<size_t>(r.route.swa_peer_decoder)]->swa_pool();
      if (peer != nullptr && peer->Find(key, q_.now()) != nullptr) {
        restored = true;
        ready = std::max(ready, q_.now() + Transfer(p_.swa_state_bytes));
      }
    }
    if (!restored) r.encoder_replay = std::min<int64_t>(p_.window, r.H);
  }
  q_.At(ready, this, kEncFetched, i);
}

void Simulation::EncFetched(size_t i) {
  if (AbandonedInAdmission(i)) return;
  const Req& r = reqs_[i];
  const double work = p_.encoder.load_token_s * static_cast<double>(r.H) +
                      p_.encoder.replay_token_s * static_cast<double>(r.encoder_replay);
  cpu_.Run(work, this, kEncReady, i);
}

void Simulation::EncReady(size_t i) {
  if (AbandonedInAdmission(i)) return;
  Req& r = reqs_[i];
  r.phase = Phase::kEncoderQueued;
  r.enc_job = Enc(r).Enqueue(i, r.H, N(i));
}

void Simulation::OnPrefilled(int, uint64_t request) {
  const size_t i = static_cast<size_t>(request);
  Req& r = reqs_[i];
  r.enc_job = -1;
  r.phase = Phase::kAdmission;
  const double now = q_.now();
  // The new units go to the cache in the background; the SWA state at N stays in the encoder's pool;
  // the units (from the unit boundary below H), SWA state and handoff go back to the decoder.
  const int64_t from = r.H / o_.unit_tokens * o_.unit_tokens;
  r.cache->Write(r.keys, from, N(i), now);
  Enc(r).swa_pool().Put(r.keys.At(N(i)), p_.swa_state_bytes, 0, now);
  const uint64_t bytes = static_cast<uint64_t>(static_cast<double>(N(i) - from) * p_.kv_bytes_per_token) + p_.swa_state_bytes;
  q_.After(Transfer(bytes), this, kHandoffDone, i);
}

void Simulation::HandoffDone(size_t i) {
  if (AbandonedInAdmission(i)) return;
  Req& r = reqs_[i];
  r.decoder_replay = std::min<int64_t>(p_.window, N(i));
  cpu_.Run(p_.decoder.replay_token_s * static_cast<double>(r.decoder_replay), this, kFirstToken, i);
}

void Simulation::FirstToken(size_t i) {
  if (AbandonedInAdmission(i)) return;
  Req& r = reqs_[i];
  r.first_t = r.last_t = q_.now();
  r.generated = 1;
  r.prefilled = true;
  router_->inflight().Prefilled(r.route.placement, SimRouter::At(q_.now()));
  const int64_t out = w_[i].output_tokens;
  r.itl.reserve(static_cast<size_t>(std::max<int64_t>(0, out - 1)));
  if (out <= 1) {
    Dec(r).Abandon();  // never joins the batch: the admission ends with the finish
    r.admitted = false;
    Finish(i);
    return;
  }
  r.phase = Phase::kDecoding;
  r.admitted = false;
  r.dec_seq = Dec(r).Join(i, N(i), out - 1);
}

void Simulation::OnToken(int, uint64_t request, double t) {
  const size_t i = static_cast<size_t>(request);
  Req& r = reqs_[i];
  if (r.cancelled) return;
  r.itl.push_back(t - r.last_t);
  r.last_t = t;
  if (++r.generated >= w_[i].output_tokens) {
    r.dec_seq = -1;  // the model freed it
    Finish(i);
  }
}

void Simulation::Finish(size_t i) {
  Req& r = reqs_[i];
  r.phase = Phase::kFinishing;
  const double now = q_.now();
  const int64_t C = N(i) + r.generated - 1;  // the last sampled token was not fed
  DecoderModel& d = Dec(r);
  // DecoderCore::Finish: the generated units go to the cache (the stream ends once they are
  // acknowledged), the SWA state at C to the pool, the session stays warm.
  const int64_t from = N(i) / o_.unit_tokens * o_.unit_tokens;
  const StoreTransfer t = r.cache->WriteOpaque(static_cast<uint64_t>(i), C - from, now);
  d.swa_pool().Put(MixKey(static_cast<uint64_t>(i) ^ 0x5a5a5a5aULL), p_.swa_state_bytes, 0, now);
  if (r.session >= 0) d.KeepWarm(r.session, WarmTurn{static_cast<int64_t>(i), N(i), C});
  q_.At(t.done_at, this, kStreamEnd, i);
}

void Simulation::StreamEnd(size_t i) {
  Req& r = reqs_[i];
  if (r.cancelled) return;
  const int64_t C = N(i) + r.generated - 1;
  router_->bindings().Bind(w_[i].session, r.route.placement.decoder, C, r.route.placement.encoder, N(i));
  router_->placer().LearnEncoderRate(r.route.placement, N(i) - r.H, r.first_t - r.route_t);
  router_->prediction_scale().Add(r.route.placement.predicted_seconds, r.first_t - r.route_t);
  End(i, kOutcomeOk, 200, "");
}

void Simulation::ArmDeadline() {
  while (!deadlines_.empty() && reqs_[deadlines_.front()].phase == Phase::kDone) deadlines_.pop_front();
  if (deadline_armed_ || deadlines_.empty()) return;
  deadline_armed_ = true;
  q_.At(w_[deadlines_.front()].arrival_s + o_.deadline_s, this, kDeadline);
}

void Simulation::Deadlines() {
  deadline_armed_ = false;
  while (!deadlines_.empty() && w_[deadlines_.front()].arrival_s + o_.deadline_s <= q_.now()) {
    const size_t i = deadlines_.front();
    deadlines_.pop_front();
    Deadline(i);
  }
  ArmDeadline();
}

void Simulation::Deadline(size_t i) {
  Req& r = reqs_[i];
  if (r.phase == Phase::kDone) return;
  r.cancelled = true;
  switch (r.phase) {
    case Phase::kWaitClient:
      End(i, kOutcomeTimeout, 0, "no free client slot before the deadline");
      return;
    case Phase::kEncoderQueued:  // the prefill call is cancelled: the admission fails now
      Enc(r).Cancel(r.enc_job);
      Dec(r).Abandon();
      r.admitted = false;
      break;
    case Phase::kDecoding:
      Dec(r).Cancel(r.dec_seq);
      break;
    default:  // pending admission events see `cancelled`; the rest has nothing to stop
      break;
  }
  End(i, kOutcomeTimeout, 0, "deadline exceeded");
}

void Simulation::End(size_t i, std::string_view outcome, int http_status, std::string error) {
  Req& r = reqs_[i];
  const WorkloadRequest& wr = w_[i];
  const Phase was = r.phase;
  r.phase = Phase::kDone;
  const double now = q_.now();
  if (r.inflight) {
    router_->inflight().Ended(r.route.placement, r.prefilled, SimRouter::At(q_.now()));
    r.inflight = false;
  }
  if (r.router_admitted) {
    r.router_admitted = false;
    --router_running_;
  }
  if (r.holds_worker) {
    r.holds_worker = false;
    ReleaseWorker();
  }
  if (was != Phase::kWaitClient) ReleaseClient();
  RequestRecord& rec = records_[i];
  rec = RecordOf(wr);
  rec.start_s = r.start;
  rec.outcome = std::string(outcome);
  rec.http_status = http_status;
  rec.error = std::move(error);
  rec.e2e_s = outcome == kOutcomeTimeout ? o_.deadline_s : now - wr.arrival_s;
  if (r.route.decoder >= 0) {
    rec.decoder = r.route.placement.decoder;
    rec.encoder = r.route.placement.encoder;
    rec.placement_reason = r.route.placement.reason;
    rec.predicted_ttft_s = r.route.placement.predicted_seconds;
  }
  if (outcome == kOutcomeOk) {
    rec.completion_tokens = r.generated;
    rec.cached_tokens = r.H;
    rec.computed_tokens = wr.prompt_tokens - r.H;
    rec.encoder_replay_tokens = r.encoder_replay;
    rec.decoder_replay_tokens = r.decoder_replay;
    rec.prefix_source = r.prefix_source;
    rec.kv_bytes_read = KvBytesRead(rec.cached_tokens, rec.prefix_source);
  }
  if (r.first_t >= 0) {
    rec.ttft_s = r.first_t - wr.arrival_s;
    rec.router_ttft_s = r.first_t - r.start;
    rec.itl_s = std::move(r.itl);
  }
  r.itl = {};
  r.keys = PrefixKeys();
  last_end_ = std::max(last_end_, outcome == kOutcomeTimeout ? wr.arrival_s + o_.deadline_s : now);
  ++ended_;
  if (on_record_) on_record_(rec);
}

void Simulation::Poll() {
  // NodeTable::PollAll: each node's Status as it is now; the router decides on it until the next.
  for (size_t d = 0; d < decoders_.size(); ++d) {
    NodeLoad& n = router_->polled_decoder(static_cast<int>(d));
    n.running = decoders_[d]->running();
    n.waiting = decoders_[d]->waiting();
    n.resident_bytes = decoders_[d]->resident_bytes();
    n.polled_at = SimRouter::At(q_.now());
  }
  for (size_t e = 0; e < encoders_.size(); ++e) {
    NodeLoad& n = router_->polled_encoder(static_cast<int>(e));
    n.queued_tokens = encoders_[e]->queued_tokens();
    n.running = encoders_[e]->running();
    n.polled_at = SimRouter::At(q_.now());
  }
  router_->Polled(q_.now());
  if (ended_ < w_.size()) q_.After(o_.poll_s, this, kPoll);
}

}  // namespace

SimResult Simulate(const std::vector<WorkloadRequest>& workload, const RateProfile& profile, const SimOptions& options,
                   const std::function<void(const RequestRecord&)>& on_record) {
  Simulation s(workload, profile, options, on_record);
  return s.Run();
}

}  // namespace ds41::sim
