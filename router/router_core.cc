#include "router/router_core.h"

#include <grpcpp/grpcpp.h>

#include <set>

#include "node.grpc.pb.h"
#include "rpc/status_map.h"
#include "serving/node_protocol.h"

namespace ds41 {

namespace pb = ds41::node::v1;
using Clock = std::chrono::steady_clock;

void CancelToken::Cancel() {
  std::lock_guard<std::mutex> l(mu_);
  cancelled_ = true;
  if (ctx_) ctx_->TryCancel();
}

bool CancelToken::cancelled() const {
  std::lock_guard<std::mutex> l(mu_);
  return cancelled_;
}

bool CancelToken::Attach(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> l(mu_);
  ctx_ = ctx;
  return !cancelled_;
}

void CancelToken::Detach() {
  std::lock_guard<std::mutex> l(mu_);
  ctx_ = nullptr;
}

RouterCore::RouterCore(RouterOptions options, NodeTable* nodes, CacheClient* cache, std::shared_ptr<ChannelSet> channels,
                       RouterMetrics* metrics)
    : opt_(std::move(options)), nodes_(nodes), cache_(cache), channels_(std::move(channels)), metrics_(metrics) {}

int64_t RouterCore::CachedPrefix(const std::string& tenant_salt, const std::vector<int32_t>& tokens) const {
  if (!cache_ || tokens.size() < 2) return 0;
  // The last prompt token is always computed: its logits give the first output token.
  const std::vector<int32_t> head(tokens.begin(), tokens.end() - 1);
  return cache_->LookupPrefix(CacheNamespace::Make(opt_.fingerprint, tenant_salt), head, opt_.unit_tokens).tokens;
}

std::string RouterCore::SwaHolder(const std::string& session, int64_t position) const {
  if (session.empty() || position <= 0) return "";
  std::lock_guard<std::mutex> l(mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return "";
  if (it->second.decoder_end == position) return it->second.decoder;
  if (it->second.encoder_end == position) return it->second.encoder;
  return "";
}

void RouterCore::Bind(const std::string& session, const std::string& decoder, int64_t decoder_end,
                      const std::string& encoder, int64_t encoder_end) {
  if (session.empty()) return;
  std::lock_guard<std::mutex> l(mu_);
  auto [it, inserted] = sessions_.try_emplace(session);
  if (!inserted) lru_.erase(it->second.lru);
  lru_.push_front(session);
  Binding& b = it->second;
  b.lru = lru_.begin();
  b.decoder = decoder;
  b.decoder_end = decoder_end;
  if (!encoder.empty()) {
    b.encoder = encoder;
    b.encoder_end = encoder_end;
  }
  while (sessions_.size() > opt_.max_sessions) {
    sessions_.erase(lru_.back());
    lru_.pop_back();
  }
}

void RouterCore::LearnRates(const RouteUsage& u) {
  // The encoder rate is refined from what requests show: computed tokens over the time to the first
  // token bounds it from below, which keeps predictions honest under load.
  if (u.computed_tokens < 64 || u.ttft_seconds <= 0) return;
  const double observed = static_cast<double>(u.computed_tokens) / u.ttft_seconds;
  std::lock_guard<std::mutex> l(mu_);
  opt_.cost.encoder_tokens_per_s = 0.8 * opt_.cost.encoder_tokens_per_s + 0.2 * observed;
}

RouteResult RouterCore::Generate(const RouteRequest& rq, const TokenSink& sink) {
  RouteResult res;
  const auto t0 = Clock::now();
  const int64_t N = static_cast<int64_t>(rq.tokens.size());
  if (N == 0 || static_cast<size_t>(N) > kMaxPromptTokens) {
    res.status = InvalidArgumentError("the prompt must have 1.." + std::to_string(kMaxPromptTokens) + " tokens");
    return res;
  }
  if (running_.fetch_add(1) >= opt_.max_running) {
    running_.fetch_sub(1);
    if (metrics_) metrics_->Rejection("overloaded");
    res.status = ResourceExhaustedError("the router has " + std::to_string(opt_.max_running) + " requests in flight");
    return res;
  }
  if (metrics_) metrics_->running.Increment();
  struct Release {
    RouterCore* r;
    ~Release() {
      r->running_.fetch_sub(1);
      if (r->metrics_) r->metrics_->running.Decrement();
    }
  } release{this};

  const CacheNamespace ns = CacheNamespace::Make(opt_.fingerprint, rq.tenant_salt);
  const int64_t H = CachedPrefix(rq.tenant_salt, rq.tokens);
  std::set<std::string> excluded;
  RouteUsage& usage = res.usage;
  usage.prompt_tokens = N;

  for (int attempt = 1; attempt <= opt_.max_attempts; ++attempt) {
    res.attempts = attempt;
    std::vector<NodeLoad> decoders, encoders;
    std::string warm_holder;
    // The decoder that ended this session's last turn at H (known before the next health poll).
    const std::string bound = SwaHolder(rq.session_id, H);
    for (NodeView& v : nodes_->Healthy(NodeRole::kDecoder)) {
      if (excluded.count(v.address)) continue;
      // Warm only when it holds this session up to H: an older turn kept on another decoder is not.
      auto w = rq.session_id.empty() ? v.warm_sessions.end() : v.warm_sessions.find(rq.session_id);
      v.load.warm = (w != v.warm_sessions.end() && w->second == H) || v.address == bound;
      if (v.load.warm) warm_holder = v.address;
      decoders.push_back(v.load);
    }
    for (NodeView& v : nodes_->Healthy(NodeRole::kEncoder)) {
      if (!excluded.count(v.address)) encoders.push_back(v.load);
    }
    if (decoders.empty() || (encoders.empty() && N > H)) {
      if (metrics_) metrics_->Rejection("no_nodes");
      res.status = UnavailableError(decoders.empty() ? "no healthy decoder node" : "no healthy encoder node");
      return res;
    }
    // Who holds the SWA state at H: this router's own record, else a decoder that reports the
    // session warm (it keeps the state at its turn's end) — so a restarted router loses nothing.
    std::string swa_peer = bound;
    if (swa_peer.empty() && H > 0) swa_peer = warm_holder;
    res.swa_hint = swa_peer;
    PlacementInput in{N, H, opt_.window, H == 0 || !swa_peer.empty()};  // a stale hint falls back to a replay
    {
      std::lock_guard<std::mutex> l(mu_);
      res.placement = Place(in, decoders, encoders, opt_.cost, rng_);
    }
    const Placement& p = res.placement;
    if (metrics_) metrics_->Placement(p.reason);
    if (p.decoder.empty()) {
      if (metrics_) metrics_->Rejection("decoders_full");
      res.status = ResourceExhaustedError("every decoder is at its running limit");
      return res;
    }
    usage.predicted_ttft_seconds = p.predicted_seconds;

    pb::GenerateRequest req;
    FillModel(opt_.fingerprint, req.mutable_model());
    req.set_request_id(rq.request_id);
    req.set_session_id(rq.session_id);
    req.mutable_ns()->set_id(KeyString(ns.id));
    req.mutable_tokens()->Add(rq.tokens.begin(), rq.tokens.end());
    req.set_cached_tokens(H);
    req.set_encoder(p.encoder);
    req.mutable_swa()->set_peer(swa_peer);
    req.set_unit_tokens(opt_.unit_tokens);
    pb::Sampling* s = req.mutable_sampling();
    s->set_temperature(rq.temperature);
    s->set_top_p(rq.top_p);
    s->set_seed(rq.seed);
    s->set_max_tokens(rq.max_tokens);
    s->mutable_stop_token_ids()->Add(rq.stop_token_ids.begin(), rq.stop_token_ids.end());

    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + (rq.deadline - Clock::now()));
    if (rq.cancel && !rq.cancel->Attach(&ctx)) {
      res.status = CancelledError("request cancelled");
      return res;
    }
    auto reader = pb::Decoder::NewStub(channels_->Get(p.decoder))->Generate(&ctx, req);
    pb::GenerateResponse msg;
    bool first = true, stopped = false;
    auto last = t0;
    const char* hit_class = HitClass(N, H);
    while (reader->Read(&msg)) {
      if (msg.tokens_size() > 0) {
        const auto now = Clock::now();
        if (first) {
          usage.ttft_seconds = std::chrono::duration<double>(now - t0).count();
          if (metrics_) metrics_->Ttft(hit_class, usage.ttft_seconds, p.predicted_seconds);
          first = false;
        } else if (metrics_) {
          metrics_->InterToken(hit_class, std::chrono::duration<double>(now - last).count() / msg.tokens_size());
        }
        last = now;
        usage.completion_tokens += msg.tokens_size();
        if (!sink(std::vector<int32_t>(msg.tokens().begin(), msg.tokens().end()))) {
          stopped = true;
          ctx.TryCancel();
          break;
        }
      }
      if (!msg.finish_reason().empty()) {
        res.finish_reason = msg.finish_reason();
        const pb::Usage& u = msg.usage();
        usage.cached_tokens = u.cached_tokens();
        usage.computed_tokens = u.computed_tokens();
        usage.encoder_replay_tokens = u.encoder_replay_tokens();
        usage.decoder_replay_tokens = u.decoder_replay_tokens();
        usage.prefix_source = u.prefix_source();
        usage.swa_source = u.swa_source();
      }
    }
    const grpc::Status gs = reader->Finish();
    if (rq.cancel) rq.cancel->Detach();
    if (stopped) {
      // The decoder frees the sequence; the prompt's units and the encoder's SWA state remain.
      res.finish_reason = "stop";
      usage.cached_tokens = H;
      usage.computed_tokens = N - H;
      Bind(rq.session_id, "", -1, p.encoder, N);
      break;
    }
    if (!gs.ok()) {
      const bool cancelled = rq.cancel && rq.cancel->cancelled();
      if (first && !cancelled && gs.error_code() == grpc::StatusCode::UNAVAILABLE && attempt < opt_.max_attempts) {
        // Died before the first token: find who is gone, place again without it.
        bool blamed = false;
        nodes_->PollAll();
        for (const NodeView& v : nodes_->All()) {
          if ((v.address == p.decoder || v.address == p.encoder) && v.state != NodeState::kHealthy) {
            excluded.insert(v.address);
            blamed = true;
          }
        }
        if (!blamed) excluded.insert(p.decoder);
        if (metrics_) metrics_->Placement("retry");
        continue;
      }
      res.status = cancelled ? CancelledError("request cancelled") : FromGrpc(gs);
      res.finish_reason = "cancelled";
      return res;
    }
    Bind(rq.session_id, p.decoder, N + usage.completion_tokens - 1, p.encoder, N);
    break;
  }
  const double e2e = std::chrono::duration<double>(Clock::now() - t0).count();
  if (metrics_) {
    metrics_->EndToEnd(HitClass(N, usage.cached_tokens), e2e);
    metrics_->PromptTokens(usage.cached_tokens, N - usage.cached_tokens);
    metrics_->CompletionTokens(usage.completion_tokens);
  }
  LearnRates(usage);
  return res;
}

}  // namespace ds41
