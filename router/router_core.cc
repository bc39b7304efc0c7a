#include "router/router_core.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>

#include "node_client/node_protocol.h"
#include "router/attempt.h"
#include "util/mutex.h"

namespace ds41 {

using Clock = std::chrono::steady_clock;

// One request across its continuations. Touched by one step at a time: Start, the prefix lookup's
// answer, then each attempt's sink calls and end (gRPC orders them), then AfterNodeLost on a worker,
// then the next attempt.
struct RouterCore::Call {
  RouteRequest rq;
  TokenSink sink;
  RouteDone done;
  Clock::time_point t0, deadline;
  CacheNamespace ns;
  int64_t H = 0;
  std::set<std::string> excluded;
  Streamed streamed;
  Status lost;               // why the last attempt's node went away
  // The last attempt's encoder: it holds the SWA state at H (kept when it pulled it from a peer), the
  // SWA source for the next attempt when the one named first is gone (often the dead decoder itself).
  std::string swa_fallback;
  bool attempt_resumed = false;  // the attempt in flight is a migration
  bool attempt_got = false;      // its first ids have come (PlaceAttempt counted it started)
  RouteResult res;
};

void RouteAdmission::Release() {
  if (released_.exchange(true)) return;
  if (also_) also_();
  if (core_->metrics_) core_->metrics_->running.Decrement();
  core_->EndRunning();
}

RouterCore::RouterCore(RouterOptions options, NodeTable* nodes, CacheClient* cache, const NodeClient* node_client,
                       RouterMetrics* metrics, ThreadPool* workers)
    : opt_(std::move(options)),
      nodes_(nodes),
      cache_(cache),
      node_client_(node_client),
      metrics_(metrics),
      workers_(workers),
      placer_(opt_.placement),
      bindings_(opt_.max_sessions) {
  if (metrics_) metrics_->sessions_limit.Set(static_cast<double>(opt_.max_sessions));
}

RouterCore::Candidates RouterCore::FindCandidates(const RouteRequest& rq, int64_t H,
                                                  const std::set<std::string>& excluded) const {
  Candidates c;
  // The decoder that ended this session's last turn at H (known before the next health poll).
  c.bound = bindings_.SwaHolder(rq.session_id, H);
  for (NodeView& v : nodes_->Healthy(NodeRole::kDecoder)) {
    if (excluded.count(v.address)) continue;
    // Warm only when it holds this session up to H: an older turn kept on another decoder is not.
    auto w = rq.session_id.empty() ? v.warm_sessions.end() : v.warm_sessions.find(rq.session_id);
    v.load.warm = DecoderWarmAt(w != v.warm_sessions.end() ? w->second : -1, H, v.address == c.bound);
    if (v.load.warm) c.warm_holder = v.address;
    c.decoders.push_back(v.load);
  }
  for (NodeView& v : nodes_->Healthy(NodeRole::kEncoder)) {
    if (!excluded.count(v.address)) c.encoders.push_back(v.load);
  }
  return c;
}

GenerateInput RouterCore::BuildInput(const RouteRequest& rq, const CacheNamespace& ns, int64_t H, const Placement& p,
                                     const std::string& swa_peer, Clock::time_point deadline,
                                     const Streamed& streamed) const {
  GenerateInput in;
  in.request_id = rq.request_id;
  in.session_id = rq.session_id;
  in.ns = ns.id;
  in.tokens = rq.tokens;
  in.tokens.insert(in.tokens.end(), streamed.ids.begin(), streamed.ids.end());
  in.images = rq.images;
  in.resumed = static_cast<int64_t>(streamed.ids.size());
  in.cached_tokens = H;
  in.encoder = p.encoder;
  in.swa_peer = swa_peer;
  in.unit_tokens = opt_.unit_tokens;
  // REQUIRES (EndedBy): fewer tokens streamed than max_tokens; the resumed ones are not generated again.
  in.sampling = rq.sampling;
  in.sampling.max_tokens = rq.sampling.max_tokens - static_cast<uint32_t>(streamed.ids.size());
  in.deadline = deadline;
  return in;
}

namespace {

// The call ended because its node went away, not because of the request: UNAVAILABLE (the process
// died or refused: gRPC says "Socket closed" or "Connection reset by peer"), UNKNOWN (a stream the
// transport removed) or CANCELLED by the node's side (its shutdown grace ran out).
bool NodeLost(const Status& s, bool cancelled_by_us) {
  switch (s.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kUnknown: return true;
    case StatusCode::kCancelled: return !cancelled_by_us;
    default: return false;
  }
}

}  // namespace

bool RouterCore::OnTokens(Call& c, const GeneratedTokens& got_tokens) {
  const Placement& p = c.res.placement;
  RouteUsage& usage = c.res.usage;
  const std::vector<int32_t>& ids = got_tokens.ids;
  const char* hit_class = HitClass(static_cast<int64_t>(c.rq.tokens.size()), c.H);
  const auto now = Clock::now();
  const bool attempt_first = !c.attempt_got;
  if (attempt_first) {
    inflight_.Prefilled(p);
    c.attempt_got = true;
  }
  if (c.streamed.ids.empty()) {
    usage.ttft_seconds = std::chrono::duration<double>(now - c.t0).count();
    if (metrics_) metrics_->Ttft(hit_class, usage.ttft_seconds, p.predicted_seconds);
  } else if (metrics_) {
    // The client's view: a migration's stall is an inter-token gap too, and is also kept apart.
    const double gap = std::chrono::duration<double>(now - c.streamed.last).count();
    metrics_->InterToken(hit_class, gap / static_cast<double>(ids.size()));
    if (attempt_first && c.attempt_resumed) metrics_->MigrationStall(gap);
  }
  c.streamed.last = now;
  c.streamed.ids.insert(c.streamed.ids.end(), ids.begin(), ids.end());
  usage.completion_tokens += static_cast<int64_t>(ids.size());
  return c.sink(got_tokens);
}

RouterCore::Attempt RouterCore::JudgeAttempt(Call& c, const GenerateCallResult& call) {
  const RouteRequest& rq = c.rq;
  RouteResult* res = &c.res;
  const Placement& p = res->placement;
  RouteUsage& usage = res->usage;
  const int64_t N = static_cast<int64_t>(rq.tokens.size());  // the client's prompt; a migration adds resumed ones
  const int64_t H = c.H;
  inflight_.Ended(p, /*prefilled=*/c.attempt_got);
  if (!call.end.finish_reason.empty()) {
    res->finish_reason = call.end.finish_reason;
    const GenerateUsage& u = call.end.usage;
    usage.cached_tokens = u.cached_tokens;
    usage.computed_tokens = u.computed_tokens;
    usage.encoder_replay_tokens = u.encoder_replay_tokens;
    usage.decoder_replay_tokens = u.decoder_replay_tokens;
    usage.prefix_source = u.prefix_source;
    usage.swa_source = u.swa_source;
  }
  if (call.stopped) {
    // The decoder frees the sequence; the prompt's units and the encoder's SWA state remain.
    res->status = Status::Ok();
    res->finish_reason = "stop";
    usage.cached_tokens = H;
    usage.computed_tokens = N - H;
    BindSession(rq.session_id, "", -1, p.encoder, N);
    return Attempt::kDone;
  }
  if (!call.status.ok()) {
    const bool cancelled = rq.cancel && rq.cancel->cancelled();
    res->status = cancelled ? CancelledError("request cancelled") : call.status;
    res->finish_reason = "cancelled";
    if (NodeLost(call.status, cancelled) && !cancelled) return Attempt::kNodeLost;
    if (metrics_ && cancelled) metrics_->Cancelled(rq.cancel->reason());
    if (metrics_ && !cancelled && call.status.code() == StatusCode::kDeadlineExceeded) metrics_->Cancelled(CancelReason::kDeadline);
    return Attempt::kFailed;
  }
  res->status = Status::Ok();  // an earlier attempt's failure is behind us
  BindSession(rq.session_id, p.decoder, N + usage.completion_tokens - 1, p.encoder, N);
  return Attempt::kDone;
}

void RouterCore::BindSession(const std::string& session, const std::string& decoder, int64_t decoder_end,
                             const std::string& encoder, int64_t encoder_end) {
  const size_t bound = bindings_.Bind(session, decoder, decoder_end, encoder, encoder_end);
  if (metrics_) metrics_->sessions_bound.Set(static_cast<double>(bound));
}

std::string RouterCore::EndedBy(const RouteRequest& rq, const Streamed& streamed) {
  if (streamed.ids.empty()) return "";
  const int32_t last = streamed.ids.back();
  const std::vector<int32_t>& stops = rq.sampling.stop_ids;
  if (std::find(stops.begin(), stops.end(), last) != stops.end()) return "stop";
  if (streamed.ids.size() >= rq.sampling.max_tokens) return "length";
  return "";
}

void RouterCore::ExcludeFailed(const Placement& p, std::set<std::string>* excluded) {
  bool blamed = false;
  nodes_->PollAll();
  for (const NodeView& v : nodes_->All()) {
    if ((v.address == p.decoder || v.address == p.encoder) && v.state != NodeState::kHealthy) {
      excluded->insert(v.address);
      blamed = true;
    }
  }
  if (!blamed) excluded->insert(p.decoder);
}

void RouterCore::RecordEnd(const RouteResult& res, Clock::time_point t0) {
  const RouteUsage& usage = res.usage;
  if (metrics_) {
    const double e2e = std::chrono::duration<double>(Clock::now() - t0).count();
    metrics_->EndToEnd(HitClass(usage.prompt_tokens, usage.cached_tokens), e2e);
    metrics_->PromptTokens(usage.cached_tokens, usage.prompt_tokens - usage.cached_tokens);
    metrics_->CompletionTokens(usage.completion_tokens);
  }
  // A migrated request's TTFT was its first attempt's, on another placement: no sample for the rate.
  if (res.migrations == 0) {
    placer_.LearnEncoderRate(res.placement, usage.computed_tokens, usage.ttft_seconds);
    if (res.status.ok()) prediction_scale_.Add(usage.predicted_ttft_seconds, usage.ttft_seconds);
  }
}

StatusOr<std::shared_ptr<RouteAdmission>> RouterCore::Admit() {
  if (draining_.load()) return UnavailableError("the router is shutting down");
  if (running_.fetch_add(1) >= opt_.max_running) {
    EndRunning();
    if (metrics_) metrics_->Rejection("overloaded");
    return ResourceExhaustedError("the router has " + std::to_string(opt_.max_running) + " requests in flight");
  }
  if (metrics_) metrics_->running.Increment();
  return std::make_shared<RouteAdmission>(this);
}

RouteResult RouterCore::Generate(const RouteRequest& rq, const TokenSink& sink) {
  std::promise<RouteResult> ended;
  std::future<RouteResult> result = ended.get_future();
  Start(rq, sink, [&ended](RouteResult r) { ended.set_value(std::move(r)); });
  return result.get();
}

void RouterCore::Start(RouteRequest request, TokenSink sink, RouteDone done) {
  auto c = std::make_shared<Call>();
  c->rq = std::move(request);
  c->sink = std::move(sink);
  c->done = std::move(done);
  const RouteRequest& rq = c->rq;
  RouteResult& res = c->res;
  c->t0 = rq.arrival == Clock::time_point{} ? Clock::now() : rq.arrival;
  const int64_t N = static_cast<int64_t>(rq.tokens.size());
  auto refuse = [&c](Status s) {
    c->res.status = std::move(s);
    RouteDone d = std::move(c->done);
    RouteResult r = std::move(c->res);
    if (c->rq.admission) c->rq.admission->Release();
    d(std::move(r));
  };
  if (N == 0 || static_cast<size_t>(N) > kMaxPromptTokens) {
    return refuse(InvalidArgumentError("the prompt must have 1.." + std::to_string(kMaxPromptTokens) + " tokens"));
  }
  if (draining_.load()) return refuse(UnavailableError("the router is shutting down"));
  // The client's deadline, capped by the router's; one already past is refused before any work.
  c->deadline = std::min(rq.deadline, c->t0 + opt_.request_timeout);
  if (c->deadline <= Clock::now()) {
    if (metrics_) metrics_->Rejection("deadline");
    return refuse(DeadlineExceededError("the request's deadline has already passed"));
  }
  if (!rq.admission) {
    StatusOr<std::shared_ptr<RouteAdmission>> admitted = Admit();
    if (!admitted.ok()) return refuse(admitted.status());
    c->rq.admission = std::move(*admitted);
  }
  // The request's cancel token joins the set CancelAll cancels. Both APIs give every request one;
  // a caller that gives none (a test, a tool) cannot be cancelled at shutdown, only waited for.
  if (rq.cancel) {
    MutexLock l(&mu_);
    inflight_cancels_.insert(rq.cancel);
  }
  c->ns = CacheNamespace::Make(opt_.fingerprint, rq.tenant_salt);
  // H once, for every attempt: a retry or a migration prefills the prompt from the H the first
  // attempt had, so the encoder computes what it computed then. (The first attempt's units make a
  // later lookup longer, but the SWA state at that longer H would be rebuilt by a bounded replay,
  // and a migrated reply would no longer be the uninterrupted one; MODEL.md §10.4.)
  res.usage.prompt_tokens = N;
  // The last prompt token is always computed (its logits give the first output token), so the
  // lookup asks for the rest. The placement goes on from the answer, on the thread it comes on.
  if (!cache_ || N < 2) return Next(c);
  lookups_.Hold();
  cache_->LookupPrefixAsync(c->ns, std::vector<int32_t>(rq.tokens.begin(), rq.tokens.end() - 1), opt_.unit_tokens,
                            rq.cancel, [this, c](PrefixHit hit) mutable {
                              // The request goes before the lookup counts as answered: its last
                              // reference may end its admission, which touches this core.
                              std::shared_ptr<Call> call = std::move(c);
                              call->H = hit.tokens;
                              try {
                                Next(call);
                              } catch (const std::exception& e) {  // on a gRPC thread, which would drop it
                                call->res.status = InternalError(std::string("placing the request: ") + e.what());
                                Finish(call);
                              }
                              call.reset();
                              lookups_.Release();
                            });
}

void RouterCore::Next(const std::shared_ptr<Call>& c) {
  const RouteRequest& rq = c->rq;
  RouteResult& res = c->res;
  const bool migration = !c->streamed.ids.empty();
  if (!PlaceAttempt(rq, c->H, c->excluded, c->deadline, /*count_rejection=*/!migration, c->swa_fallback, &res)) {
    if (migration) {
      if (metrics_) metrics_->Migration("refused");
      res.status = UnavailableError("the decoder serving this request failed after " + std::to_string(c->streamed.ids.size()) +
                                    " tokens (" + c->lost.ToString() + ") and no other could resume it: " +
                                    std::string(res.status.message()));
    }
    return Finish(c);
  }
  ++res.attempts;
  if (migration) ++res.migrations;
  c->attempt_resumed = migration;
  c->attempt_got = false;
  node_client_->GenerateAsync(
      res.placement.decoder, BuildInput(rq, c->ns, c->H, res.placement, res.swa_hint, c->deadline, c->streamed), rq.cancel,
      [this, c](const GeneratedTokens& tokens) { return OnTokens(*c, tokens); },
      [this, c](GenerateCallResult call) { AttemptEnded(c, call); });
}

void RouterCore::AttemptEnded(const std::shared_ptr<Call>& c, const GenerateCallResult& call) {
  const Attempt a = JudgeAttempt(*c, call);
  if (c->attempt_resumed && metrics_) {
    const bool cancelled = c->rq.cancel && c->rq.cancel->cancelled();
    metrics_->Migration(a == Attempt::kDone ? "completed" : cancelled ? "cancelled" : "failed");
  }
  if (a == Attempt::kDone) RecordEnd(c->res, c->t0);
  if (a != Attempt::kNodeLost) return Finish(c);
  // The node went away: who is gone is a health poll away, which blocks: on a worker.
  if (workers_ == nullptr) return AfterNodeLost(c);
  workers_->Schedule([this, c] { AfterNodeLost(c); });
}

void RouterCore::AfterNodeLost(const std::shared_ptr<Call>& c) {
  const RouteRequest& rq = c->rq;
  RouteResult& res = c->res;
  c->swa_fallback = res.placement.encoder;
  c->lost = res.status;
  ExcludeFailed(res.placement, &c->excluded);
  const char* policy = PlacementPolicyName(placer_.policy());
  if (c->streamed.ids.empty()) {
    if (res.attempts >= opt_.max_attempts) return Finish(c);
    if (metrics_) metrics_->Placement(policy, "retry");
    return Next(c);
  }
  // After part of the reply: the decoder may have died right after the reply's last token.
  if (const std::string end = EndedBy(rq, c->streamed); !end.empty()) {
    res.status = Status::Ok();
    res.finish_reason = end;
    res.usage.cached_tokens = c->H;
    res.usage.computed_tokens = static_cast<int64_t>(rq.tokens.size()) - c->H;
    RecordEnd(res, c->t0);
    return Finish(c);
  }
  std::string why;
  if (opt_.max_migrations == 0) {
    why = "migration is off (--max-migrations 0)";
  } else if (res.migrations >= opt_.max_migrations) {
    why = "it was resumed " + std::to_string(res.migrations) + " times already (--max-migrations " +
          std::to_string(opt_.max_migrations) + ")";
  } else if (Clock::now() >= c->deadline) {
    why = "its deadline has passed";
  }
  if (!why.empty()) {
    if (metrics_) metrics_->Migration("refused");
    res.status = UnavailableError("the decoder serving this request failed after " + std::to_string(c->streamed.ids.size()) +
                                  " tokens (" + c->lost.ToString() + ") and " + why);
    return Finish(c);
  }
  if (metrics_) metrics_->Placement(policy, "migration");
  Next(c);
}

void RouterCore::Finish(const std::shared_ptr<Call>& c) {
  if (c->rq.cancel) {
    MutexLock l(&mu_);
    inflight_cancels_.erase(c->rq.cancel);
  }
  // Released before `done`, as the request's end: a caller that waits for `done` sees it counted out.
  c->rq.admission->Release();
  RouteDone done = std::move(c->done);
  c->sink = nullptr;  // what it holds (the client's stream) goes with the request
  done(std::move(c->res));
}

void RouterCore::EndRunning() {
  {
    // Under mu_, so a WaitIdle that just saw running_ > 0 is already waiting when notified.
    MutexLock l(&mu_);
    running_.fetch_sub(1);
  }
  idle_cv_.NotifyAll();
}

bool RouterCore::WaitIdle(Clock::time_point deadline) const {
  MutexLock l(&mu_);
  return idle_cv_.WaitUntil(&mu_, deadline, [this] { return running_.load() == 0; });
}

void RouterCore::CancelAll(CancelReason reason) {
  MutexLock l(&mu_);
  for (const auto& c : inflight_cancels_) c->Cancel(reason);
}

bool RouterCore::PlaceAttempt(const RouteRequest& rq, int64_t H, const std::set<std::string>& excluded,
                              Clock::time_point deadline, bool count_rejection, const std::string& swa_fallback,
                              RouteResult* res) {
  const int64_t N = static_cast<int64_t>(rq.tokens.size());
  Candidates c = FindCandidates(rq, H, excluded);
  if (c.decoders.empty() || (c.encoders.empty() && N > H)) {
    if (metrics_ && count_rejection) metrics_->Rejection("no_nodes");
    res->status = UnavailableError(c.decoders.empty() ? "no healthy decoder node" : "no healthy encoder node");
    return false;
  }
  AttemptInput in;
  in.prompt_tokens = N;
  in.cached_tokens = H;
  in.window = opt_.window;
  in.session = rq.session_id;
  if (placer_.policy() == PlacementPolicy::kPrefixAffinity) {
    uint64_t seed = 0;
    // The tenant's namespace: chains of two tenants never meet.
    std::memcpy(&seed, CacheNamespace::Make(opt_.fingerprint, rq.tenant_salt).id.data(), sizeof(seed));
    in.prefix_chain = PrefixChain(rq.tokens, opt_.unit_tokens, seed);
  }
  in.bound = std::move(c.bound);
  in.warm_holder = std::move(c.warm_holder);
  in.swa_fallback = swa_fallback;
  in.excluded = &excluded;
  in.first_attempt = res->attempts == 0;
  in.max_queue_seconds = opt_.max_queue_seconds;
  in.prediction_scale = &prediction_scale_;
  MutexLock placing(&placing_mu_);
  inflight_.Apply(&c.decoders, &c.encoders);
  in.seconds_left = std::chrono::duration<double>(deadline - Clock::now()).count();
  AttemptDecision d = DecideAttempt(std::move(in), c.decoders, c.encoders, &placer_);
  res->swa_hint = std::move(d.swa_peer);
  res->placement = std::move(d.placement);
  const Placement& p = res->placement;
  if (metrics_) metrics_->Placement(PlacementPolicyName(placer_.policy()), p.reason);
  if (d.refusal != AttemptRefusal::kDecodersFull) res->usage.predicted_ttft_seconds = p.predicted_seconds;
  if (d.refusal == AttemptRefusal::kNone) {
    inflight_.Started(p);
    return true;
  }
  // Queue refusals come only on a first attempt; the others are counted unless this is a migration.
  if (metrics_ && (count_rejection || d.refusal == AttemptRefusal::kQueue)) metrics_->Rejection(AttemptRefusalName(d.refusal));
  if (d.refusal == AttemptRefusal::kQueue) res->retry_after_s = d.retry_after_s;
  res->status = d.refusal == AttemptRefusal::kDeadline ? DeadlineExceededError(d.message) : ResourceExhaustedError(d.message);
  return false;
}

}  // namespace ds41
