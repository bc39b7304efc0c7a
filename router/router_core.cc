#include "router/router_core.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "node_client/node_protocol.h"

namespace ds41 {

using Clock = std::chrono::steady_clock;

RouterCore::RouterCore(RouterOptions options, NodeTable* nodes, CacheClient* cache, const NodeClient* node_client,
                       RouterMetrics* metrics)
    : opt_(std::move(options)),
      nodes_(nodes),
      cache_(cache),
      node_client_(node_client),
      metrics_(metrics),
      placer_(opt_.placement),
      bindings_(opt_.max_sessions) {
  if (metrics_) metrics_->sessions_limit.Set(static_cast<double>(opt_.max_sessions));
}

int64_t RouterCore::CachedPrefix(const std::string& tenant_salt, const std::vector<int32_t>& tokens) const {
  if (!cache_ || tokens.size() < 2) return 0;
  // The last prompt token is always computed: its logits give the first output token.
  const std::vector<int32_t> head(tokens.begin(), tokens.end() - 1);
  return cache_->LookupPrefix(CacheNamespace::Make(opt_.fingerprint, tenant_salt), head, opt_.unit_tokens).tokens;
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

RouterCore::Attempt RouterCore::RunAttempt(const RouteRequest& rq, const GenerateInput& in, Clock::time_point t0,
                                           const TokenSink& sink, Streamed* streamed, RouteResult* res) {
  const Placement& p = res->placement;
  RouteUsage& usage = res->usage;
  const int64_t N = static_cast<int64_t>(rq.tokens.size());  // the client's prompt; in.tokens adds resumed ones
  const int64_t H = in.cached_tokens;
  const char* hit_class = HitClass(N, H);
  bool got = false;  // this attempt's first ids have come (PlaceAttempt counted it started)
  const GenerateCallResult call = node_client_->Generate(p.decoder, in, rq.cancel.get(), [&](const GeneratedTokens& got_tokens) {
    const std::vector<int32_t>& ids = got_tokens.ids;
    const auto now = Clock::now();
    const bool attempt_first = !got;
    if (attempt_first) {
      inflight_.Prefilled(p);
      got = true;
    }
    if (streamed->ids.empty()) {
      usage.ttft_seconds = std::chrono::duration<double>(now - t0).count();
      if (metrics_) metrics_->Ttft(hit_class, usage.ttft_seconds, p.predicted_seconds);
    } else if (metrics_) {
      // The client's view: a migration's stall is an inter-token gap too, and is also kept apart.
      const double gap = std::chrono::duration<double>(now - streamed->last).count();
      metrics_->InterToken(hit_class, gap / static_cast<double>(ids.size()));
      if (attempt_first && in.resumed > 0) metrics_->MigrationStall(gap);
    }
    streamed->last = now;
    streamed->ids.insert(streamed->ids.end(), ids.begin(), ids.end());
    usage.completion_tokens += static_cast<int64_t>(ids.size());
    return sink(got_tokens);
  });
  inflight_.Ended(p, /*prefilled=*/got);
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

RouteResult RouterCore::Generate(const RouteRequest& rq, const TokenSink& sink) {
  RouteResult res;
  const auto t0 = Clock::now();
  const int64_t N = static_cast<int64_t>(rq.tokens.size());
  if (N == 0 || static_cast<size_t>(N) > kMaxPromptTokens) {
    res.status = InvalidArgumentError("the prompt must have 1.." + std::to_string(kMaxPromptTokens) + " tokens");
    return res;
  }
  if (draining_.load()) {
    res.status = UnavailableError("the router is shutting down");
    return res;
  }
  // The client's deadline, capped by the router's; one already past is refused before any work.
  const Clock::time_point deadline = std::min(rq.deadline, t0 + opt_.request_timeout);
  if (deadline <= t0) {
    if (metrics_) metrics_->Rejection("deadline");
    res.status = DeadlineExceededError("the request's deadline has already passed");
    return res;
  }
  if (running_.fetch_add(1) >= opt_.max_running) {
    EndRunning();
    if (metrics_) metrics_->Rejection("overloaded");
    res.status = ResourceExhaustedError("the router has " + std::to_string(opt_.max_running) + " requests in flight");
    return res;
  }
  if (metrics_) metrics_->running.Increment();
  // The request's cancel token joins the set CancelAll cancels. Both APIs give every request one;
  // a caller that gives none (a test, a tool) cannot be cancelled at shutdown, only waited for.
  if (rq.cancel) {
    std::lock_guard<std::mutex> l(mu_);
    inflight_cancels_.insert(rq.cancel);
  }
  struct Release {
    RouterCore* r;
    std::shared_ptr<CancelToken> cancel;
    ~Release() {
      if (cancel) {
        std::lock_guard<std::mutex> l(r->mu_);
        r->inflight_cancels_.erase(cancel);
      }
      if (r->metrics_) r->metrics_->running.Decrement();
      r->EndRunning();
    }
  } release{this, rq.cancel};
  return GeneratePlaced(rq, sink, t0, deadline);
}

void RouterCore::EndRunning() {
  {
    // Under mu_, so a WaitIdle that just saw running_ > 0 is already waiting when notified.
    std::lock_guard<std::mutex> l(mu_);
    running_.fetch_sub(1);
  }
  idle_cv_.notify_all();
}

bool RouterCore::WaitIdle(Clock::time_point deadline) const {
  std::unique_lock<std::mutex> l(mu_);
  return idle_cv_.wait_until(l, deadline, [this] { return running_.load() == 0; });
}

void RouterCore::CancelAll(CancelReason reason) {
  std::lock_guard<std::mutex> l(mu_);
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
  std::string swa_peer = SwaPeer(c.bound, c.warm_holder, H);
  if ((swa_peer.empty() || excluded.count(swa_peer)) && H > 0 && !swa_fallback.empty() && !excluded.count(swa_fallback)) {
    swa_peer = swa_fallback;
  }
  res->swa_hint = swa_peer;
  PlacementInput in;
  in.prompt_tokens = N;
  in.cached_tokens = H;
  in.window = opt_.window;
  in.swa_available = SwaAvailable(H, swa_peer);
  in.session = rq.session_id;
  if (placer_.policy() == PlacementPolicy::kPrefixAffinity) {
    uint64_t seed = 0;
    // The tenant's namespace: chains of two tenants never meet.
    std::memcpy(&seed, CacheNamespace::Make(opt_.fingerprint, rq.tenant_salt).id.data(), sizeof(seed));
    in.prefix_chain = PrefixChain(rq.tokens, opt_.unit_tokens, seed);
  }
  std::lock_guard<std::mutex> placing(placing_mu_);
  inflight_.Apply(&c.decoders, &c.encoders);
  res->placement = placer_.Place(in, c.decoders, c.encoders);
  const Placement& p = res->placement;
  if (metrics_) metrics_->Placement(PlacementPolicyName(placer_.policy()), p.reason);
  if (p.decoder.empty()) {
    if (metrics_ && count_rejection) metrics_->Rejection("decoders_full");
    res->status = ResourceExhaustedError("every decoder is at its running limit");
    return false;
  }
  res->usage.predicted_ttft_seconds = p.predicted_seconds;
  // A prompt whose predicted first token falls after its deadline is refused now, not started
  // and abandoned half way (its encoder time would be spent for nobody).
  const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
  if (p.predicted_seconds > left) {
    if (metrics_ && count_rejection) metrics_->Rejection("deadline");
    char msg[160];
    std::snprintf(msg, sizeof msg, "the predicted time to the first token, %.1f s, is past the %.1f s left before the request's deadline",
                  p.predicted_seconds, std::max(0.0, left));
    res->status = DeadlineExceededError(msg);
    return false;
  }
  // Overload: a new request (not a retry or a migration, already admitted) that would wait behind
  // more queued work than max_queue_seconds is refused now, quickly, with the predicted excess as
  // its retry-after hint; what is admitted keeps a bounded time to the first token.
  const double wait = opt_.max_queue_seconds > 0 && res->attempts == 0 ? p.queue_seconds * prediction_scale_.Scale() : 0;
  if (wait > opt_.max_queue_seconds && opt_.max_queue_seconds > 0) {
    if (metrics_) metrics_->Rejection("queue");
    res->retry_after_s = static_cast<int>(std::clamp(std::ceil(wait - opt_.max_queue_seconds), 1.0, 60.0));
    char msg[200];
    std::snprintf(msg, sizeof msg, "overloaded: the predicted wait behind queued work, %.1f s, exceeds the router's %.1f s",
                  wait, opt_.max_queue_seconds);
    res->status = ResourceExhaustedError(msg);
    return false;
  }
  placer_.Served(in, p);
  inflight_.Started(p);
  return true;
}

RouteResult RouterCore::GeneratePlaced(const RouteRequest& rq, const TokenSink& sink, Clock::time_point t0,
                                       Clock::time_point deadline) {
  RouteResult res;
  const int64_t N = static_cast<int64_t>(rq.tokens.size());

  const CacheNamespace ns = CacheNamespace::Make(opt_.fingerprint, rq.tenant_salt);
  // H once, for every attempt: a retry or a migration prefills the prompt from the H the first
  // attempt had, so the encoder computes what it computed then. (The first attempt's units make a
  // later lookup longer, but the SWA state at that longer H would be rebuilt by a bounded replay,
  // and a migrated reply would no longer be the uninterrupted one; MODEL.md §10.4.)
  const int64_t H = CachedPrefix(rq.tenant_salt, rq.tokens);
  std::set<std::string> excluded;
  Streamed streamed;
  Status lost;  // why the last attempt's node went away
  // The last attempt's encoder: it holds the SWA state at H (kept when it pulled it from a peer), the
  // SWA source for the next attempt when the one named first is gone (often the dead decoder itself).
  std::string swa_fallback;
  res.usage.prompt_tokens = N;
  const char* policy = PlacementPolicyName(placer_.policy());
  for (;;) {
    const bool migration = !streamed.ids.empty();
    if (!PlaceAttempt(rq, H, excluded, deadline, /*count_rejection=*/!migration, swa_fallback, &res)) {
      if (migration) {
        if (metrics_) metrics_->Migration("refused");
        res.status = UnavailableError("the decoder serving this request failed after " + std::to_string(streamed.ids.size()) +
                                      " tokens (" + lost.ToString() + ") and no other could resume it: " +
                                      std::string(res.status.message()));
      }
      return res;
    }
    ++res.attempts;
    if (migration) ++res.migrations;
    const Attempt a = RunAttempt(rq, BuildInput(rq, ns, H, res.placement, res.swa_hint, deadline, streamed), t0, sink,
                                 &streamed, &res);
    if (migration && metrics_) {
      const bool cancelled = rq.cancel && rq.cancel->cancelled();
      metrics_->Migration(a == Attempt::kDone ? "completed" : cancelled ? "cancelled" : "failed");
    }
    if (a == Attempt::kDone) break;
    if (a == Attempt::kFailed) return res;
    swa_fallback = res.placement.encoder;
    // The node went away: find who is gone (a poll says), place again without it.
    lost = res.status;
    ExcludeFailed(res.placement, &excluded);
    if (streamed.ids.empty()) {
      if (res.attempts >= opt_.max_attempts) return res;
      if (metrics_) metrics_->Placement(policy, "retry");
      continue;
    }
    // After part of the reply: the decoder may have died right after the reply's last token.
    if (const std::string end = EndedBy(rq, streamed); !end.empty()) {
      res.status = Status::Ok();
      res.finish_reason = end;
      res.usage.cached_tokens = H;
      res.usage.computed_tokens = N - H;
      break;
    }
    std::string why;
    if (opt_.max_migrations == 0) {
      why = "migration is off (--max-migrations 0)";
    } else if (res.migrations >= opt_.max_migrations) {
      why = "it was resumed " + std::to_string(res.migrations) + " times already (--max-migrations " +
            std::to_string(opt_.max_migrations) + ")";
    } else if (Clock::now() >= deadline) {
      why = "its deadline has passed";
    }
    if (!why.empty()) {
      if (metrics_) metrics_->Migration("refused");
      res.status = UnavailableError("the decoder serving this request failed after " + std::to_string(streamed.ids.size()) +
                                    " tokens (" + lost.ToString() + ") and " + why);
      return res;
    }
    if (metrics_) metrics_->Placement(policy, "migration");
  }
  RecordEnd(res, t0);
  return res;
}

}  // namespace ds41
