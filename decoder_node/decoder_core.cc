#include "decoder_node/decoder_core.h"

#include <algorithm>

#include "util/clock.h"

namespace ds41 {
namespace {


}  // namespace

// ---- TokenStream ---------------------------------------------------------------------------------

void TokenStream::Push(int32_t token) {
  {
    std::lock_guard<std::mutex> l(mu_);
    tokens_.push_back(token);
  }
  cv_.notify_all();
}

void TokenStream::Finish(Status status, std::string reason, GenerateUsage usage) {
  {
    std::lock_guard<std::mutex> l(mu_);
    done_ = true;
    status_ = std::move(status);
    reason_ = std::move(reason);
    usage_ = std::move(usage);
  }
  cv_.notify_all();
}

bool TokenStream::Pop(std::vector<int32_t>* out, std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> l(mu_);
  if (tokens_.empty() && !done_) cv_.wait_for(l, wait, [this] { return done_ || !tokens_.empty(); });
  out->assign(tokens_.begin(), tokens_.end());
  tokens_.clear();
  return done_;
}

Status TokenStream::status() const {
  std::lock_guard<std::mutex> l(mu_);
  return status_;
}
std::string TokenStream::finish_reason() const {
  std::lock_guard<std::mutex> l(mu_);
  return reason_;
}
GenerateUsage TokenStream::usage() const {
  std::lock_guard<std::mutex> l(mu_);
  return usage_;
}

// ---- DecoderCore ---------------------------------------------------------------------------------

struct DecoderCore::Sequence {
  SequenceState state;
  std::vector<int32_t> tokens;  // prompt + generated tokens so far
  int64_t prompt_len = 0;
  std::string session_id;
  UnitKey ns{};
  int unit_tokens = kDefaultUnitTokens;
  SamplingParams sampling;
  Rng rng{0};
  uint32_t max_tokens = 0;
  std::vector<int32_t> stop_ids;
  int64_t generated = 0;
  std::shared_ptr<TokenStream> stream;
  GenerateUsage usage;
};

DecoderCore::DecoderCore(const Model& model, CacheClient* cache, PrefillCall prefill, DecoderOptions options,
                         NodeMetrics* metrics, ThreadPool* compute)
    : model_(model),
      experts_(options.expert_cache_bytes > 0 ? std::make_unique<ExpertCache>(model.weights(), options.expert_cache_bytes)
                                              : nullptr),
      engine_(model, compute),
      cache_(cache),
      prefill_(std::move(prefill)),
      opt_(options),
      metrics_(metrics),
      swa_pool_(options.swa_pool_bytes, options.swa_ttl_ms),
      io_(std::make_unique<ThreadPool>(4)) {
  engine_.set_expert_cache(experts_.get());
  loop_ = std::thread([this] { BatchLoop(); });
}

DecoderCore::~DecoderCore() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  loop_.join();
}

int64_t DecoderCore::running() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int64_t>(running_.size()) + stepping_.load();
}

uint64_t DecoderCore::ResidentBytes() const {
  uint64_t n = swa_pool_.bytes() + (experts_ ? experts_->resident_bytes() : 0);
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, s] : sessions_) n += s.state.ByteSize();
  for (const auto& s : running_) n += s->state.ByteSize();
  return n;
}

std::vector<std::pair<std::string, int64_t>> DecoderCore::WarmSessions() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [id, s] : sessions_) out.emplace_back(id, s.state.length);
  return out;
}

std::optional<std::string> DecoderCore::GetSwa(const UnitKey& ns, const UnitKey& prefix_key) {
  return swa_pool_.Get(SwaPoolKey(ns, prefix_key));
}

void DecoderCore::UpdateResidency() {
  if (!metrics_) return;
  uint64_t sessions = 0, running = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [id, s] : sessions_) sessions += s.state.ByteSize();
    for (const auto& s : running_) running += s->state.ByteSize();
    metrics_->running.Set(static_cast<double>(running_.size()));
  }
  metrics_->resident_sessions.Set(static_cast<double>(sessions));
  metrics_->resident_running.Set(static_cast<double>(running));
  metrics_->resident_swa.Set(static_cast<double>(swa_pool_.bytes()));
  metrics_->waiting.Set(static_cast<double>(waiting_.load()));
  if (experts_) {
    metrics_->resident_experts.Set(static_cast<double>(experts_->resident_bytes()));
    metrics_->expert_hits.Increment(static_cast<double>(experts_->hits()) - metrics_->expert_hits.Value());
    metrics_->expert_misses.Increment(static_cast<double>(experts_->misses()) - metrics_->expert_misses.Value());
  }
}

int64_t DecoderCore::LoadPrefixFromCache(const GenerateInput& in, int64_t boundary, SequenceState* st) {
  if (boundary == 0 || cache_ == nullptr) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  const int U = in.unit_tokens;
  const CacheNamespace ns{in.ns, model_.fingerprint(), kUnitFormatVersion};
  std::vector<int32_t> head(in.tokens.begin(), in.tokens.begin() + boundary);
  std::vector<UnitGet> gets;
  for (const UnitKey& k : ChainKeys(in.ns, head, U)) gets.push_back({k, std::nullopt});
  auto got = cache_->Get(ns, gets);
  auto layout = UnitLayout::FromConfig(model_.config(), U);
  std::vector<Unit> units;
  int64_t reach = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < got.size() && layout.ok(); ++i) {
    if (!got[i]) break;
    auto u = DecodeUnit(*layout, *got[i]);
    if (!u.ok() || u->first_position != reach || u->tokens != U) break;
    bytes += got[i]->size();
    reach += U;
    units.push_back(std::move(*u));
  }
  if (!units.empty() && !ApplyUnits(*layout, units, st).ok()) return 0;
  if (metrics_) {
    metrics_->kv_bytes_in.Increment(static_cast<double>(bytes));
    metrics_->kv_transfer_seconds.Observe(SecondsSince(t0));
  }
  return reach;
}

std::shared_ptr<TokenStream> DecoderCore::Generate(GenerateInput in) {
  auto stream = std::make_shared<TokenStream>();
  ++waiting_;
  const Status s = Admit(in, stream);
  --waiting_;
  if (!s.ok()) {
    if (metrics_) {
      if (s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kFailedPrecondition) {
        metrics_->requests_invalid.Increment();
      } else if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded) {
        metrics_->requests_unavailable.Increment();
      } else {
        metrics_->requests_error.Increment();
      }
    }
    stream->Finish(s, "error", {});
  }
  UpdateResidency();
  return stream;
}

Status DecoderCore::Admit(const GenerateInput& in, const std::shared_ptr<TokenStream>& stream) {
  const ModelConfig& c = model_.config();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t N = static_cast<int64_t>(in.tokens.size());
  const int U = in.unit_tokens;
  if (N == 0) return InvalidArgumentError("generate: empty prompt");
  if (in.cached_tokens < 0 || in.cached_tokens >= N) return InvalidArgumentError("generate: cached_tokens must be in [0, N)");
  if (in.max_tokens == 0) return InvalidArgumentError("generate: max_tokens must be at least 1");
  if (in.encoder.empty()) return InvalidArgumentError("generate: no encoder given");
  DS41_RETURN_IF_ERROR(in.sampling.Validate());
  DS41_RETURN_IF_ERROR(UnitLayout::FromConfig(c, U).status());
  for (int32_t t : in.tokens)
    if (t < 0 || t >= c.vocab_size) return InvalidArgumentError("generate: token " + std::to_string(t) + " outside the vocabulary");
  {
    std::lock_guard<std::mutex> l(mu_);
    if (static_cast<int64_t>(running_.size()) + waiting_.load() > opt_.max_running)
      return ResourceExhaustedError("decoder: " + std::to_string(opt_.max_running) + " sequences already running");
  }

  auto seq = std::make_unique<Sequence>();
  seq->state = SequenceState::Create(c);
  // Prefix global KV up to the unit boundary below H: the session's warm state when it covers it,
  // else the cache (the encoder returns everything from that boundary on).
  int64_t H = in.cached_tokens;
  const int64_t boundary = H / U * U;
  bool warm = false;
  if (!in.session_id.empty()) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = sessions_.find(in.session_id);
    if (it != sessions_.end() && it->second.ns == in.ns && it->second.state.length >= boundary &&
        static_cast<int64_t>(it->second.tokens.size()) <= N &&
        std::equal(it->second.tokens.begin(), it->second.tokens.begin() + boundary, in.tokens.begin())) {
      seq->state = std::move(it->second.state);
      sessions_.erase(it);
      warm = true;
    }
  }
  seq->usage.prefix_source = warm ? "warm" : (boundary > 0 ? "cache" : "none");
  if (!warm && boundary > 0) {
    const int64_t reach = LoadPrefixFromCache(in, boundary, &seq->state);
    if (reach < boundary) H = reach;  // lost units: ask the encoder for less
  }

  PrefillInput pin{in.ns, in.tokens, H, in.swa_peer, U};
  DS41_ASSIGN_OR_RETURN(PrefillOutput po, prefill_(in.encoder, pin, in.deadline));
  if (stream->cancelled()) return CancelledError("cancelled before the first token");
  DS41_ASSIGN_OR_RETURN(UnitLayout layout, UnitLayout::FromConfig(c, U));
  std::vector<Unit> units;
  for (const BuiltUnit& b : po.units) {
    auto u = DecodeUnit(layout, b.bytes);
    if (!u.ok()) return u.status().Prefixed("encoder unit");
    units.push_back(std::move(*u));
  }
  DS41_RETURN_IF_ERROR(ApplyUnits(layout, units, &seq->state));
  DS41_RETURN_IF_ERROR(seq->state.RestoreSwa(po.swa, c));
  DS41_ASSIGN_OR_RETURN(EncoderHandoff handoff, ParseHandoff(po.handoff, c));
  if (handoff.n != N) return InternalError("encoder handed off the wrong prompt length");
  const int64_t s = std::max(DefaultReplayStart(c, N), handoff.stream_start);
  const auto tr = std::chrono::steady_clock::now();
  std::vector<float> logits;
  const TokenSpan prompt{in.tokens, {}, {}};
  DS41_RETURN_IF_ERROR(engine_.DecoderReplay(&seq->state, prompt, handoff, s, &logits));

  seq->tokens = in.tokens;
  seq->prompt_len = N;
  seq->session_id = in.session_id;
  seq->ns = in.ns;
  seq->unit_tokens = U;
  seq->sampling = in.sampling;
  seq->rng = Rng(in.sampling.seed);
  seq->max_tokens = in.max_tokens;
  seq->stop_ids = in.stop_ids;
  seq->stream = stream;
  GenerateUsage& u = seq->usage;
  u.prompt_tokens = N;
  u.cached_tokens = po.cached_tokens;
  u.computed_tokens = po.computed_tokens;
  u.encoder_replay_tokens = po.replay_tokens;
  u.decoder_replay_tokens = N - s;
  u.swa_source = po.swa_source;
  const int32_t first = SampleToken(logits.data(), c.vocab_size, seq->sampling, &seq->rng);
  u.ttft_seconds = SecondsSince(t0);
  seq->generated = 1;
  seq->tokens.push_back(first);
  stream->Push(first);
  if (metrics_) {
    metrics_->prefill_seconds.Observe(SecondsSince(tr));
    metrics_->ttft_seconds.Observe(u.ttft_seconds);
    metrics_->computed_replay.Increment(static_cast<double>(N - s));
    metrics_->cached_tokens.Increment(static_cast<double>(po.cached_tokens));
    metrics_->generated_tokens.Increment();
    if (warm) metrics_->swa_warm.Increment();
  }
  const bool stop = std::find(in.stop_ids.begin(), in.stop_ids.end(), first) != in.stop_ids.end();
  if (stop || seq->generated >= static_cast<int64_t>(seq->max_tokens)) {
    Finish(std::move(seq), stop ? "stop" : "length");
    return Status::Ok();
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    running_.push_back(std::move(seq));
  }
  cv_.notify_all();
  return Status::Ok();
}

void DecoderCore::BatchLoop() {
  const ModelConfig& c = model_.config();
  for (;;) {
    std::vector<std::unique_ptr<Sequence>> batch;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !running_.empty(); });
      if (stop_) {
        for (auto& s : running_) s->stream->Finish(UnavailableError("decoder shutting down"), "error", s->usage);
        running_.clear();
        return;
      }
      batch.swap(running_);  // sequences admitted during this step join the next one
      stepping_ = static_cast<int64_t>(batch.size());
    }
    std::vector<std::unique_ptr<Sequence>> live;
    for (auto& s : batch) {
      if (s->stream->cancelled()) {
        if (metrics_) metrics_->requests_cancelled.Increment();
        s->stream->Finish(CancelledError("cancelled"), "cancelled", s->usage);  // frees the sequence
      } else {
        live.push_back(std::move(s));
      }
    }
    if (live.empty()) {
      stepping_ = 0;
      UpdateResidency();
      continue;
    }
    std::vector<SequenceState*> states;
    std::vector<int32_t> next;
    for (auto& s : live) {
      states.push_back(&s->state);
      next.push_back(s->tokens.back());
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<float> logits;
    const Status st = engine_.DecodeBatch(states, next, &logits);
    if (metrics_) {
      metrics_->decode_step_seconds.Observe(SecondsSince(t0));
      metrics_->batch_tokens.Observe(static_cast<double>(live.size()));
    }
    std::vector<std::unique_ptr<Sequence>> keep;
    for (size_t i = 0; i < live.size(); ++i) {
      auto& s = live[i];
      if (!st.ok()) {
        if (metrics_) metrics_->requests_error.Increment();
        s->stream->Finish(st, "error", s->usage);
        continue;
      }
      const int32_t tok = SampleToken(&logits[i * static_cast<size_t>(c.vocab_size)], c.vocab_size, s->sampling, &s->rng);
      s->tokens.push_back(tok);
      ++s->generated;
      s->stream->Push(tok);
      if (metrics_) metrics_->generated_tokens.Increment();
      const bool stop = std::find(s->stop_ids.begin(), s->stop_ids.end(), tok) != s->stop_ids.end();
      if (stop || s->generated >= static_cast<int64_t>(s->max_tokens)) {
        Finish(std::move(s), stop ? "stop" : "length");
      } else {
        keep.push_back(std::move(s));
      }
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      for (auto& s : keep) running_.push_back(std::move(s));
      stepping_ = 0;
    }
    UpdateResidency();
  }
}

void DecoderCore::Finish(std::unique_ptr<Sequence> seq, const std::string& reason) {
  const ModelConfig& c = model_.config();
  GenerateUsage usage = seq->usage;
  usage.completion_tokens = seq->generated;
  const int64_t C = seq->state.length;  // the last sampled token was not fed
  std::vector<int32_t> ctx(seq->tokens.begin(), seq->tokens.begin() + C);
  // The generated units go to the cache, so the next turn hits the whole context.
  std::vector<UnitPut> puts;
  auto layout = UnitLayout::FromConfig(c, seq->unit_tokens);
  auto fp = ParseFingerprint(model_.fingerprint());
  if (cache_ && layout.ok() && fp.ok()) {
    const int64_t from = seq->prompt_len / seq->unit_tokens * seq->unit_tokens;
    auto built = BuildUnits(c, *layout, *fp, seq->state, ctx, seq->ns, from, C);
    if (built.ok())
      for (const BuiltUnit& b : *built) puts.push_back({b.key, b.parent, b.bytes});
  }
  swa_pool_.Put(SwaPoolKey(seq->ns, PrefixKey(seq->ns, ctx, C, seq->unit_tokens)), seq->state.SerializeSwa(c));
  if (!seq->session_id.empty()) {
    std::lock_guard<std::mutex> l(mu_);
    Session& s = sessions_[seq->session_id];
    s.state = std::move(seq->state);
    s.tokens = std::move(ctx);
    s.ns = seq->ns;
    s.last_used_ms = SystemClock::Get()->NowMs();
    // Budget and TTL: the least recently used sessions go first.
    uint64_t total = 0;
    for (const auto& [id, ss] : sessions_) total += ss.state.ByteSize();
    const int64_t now = SystemClock::Get()->NowMs();
    while (!sessions_.empty()) {
      auto oldest = sessions_.begin();
      for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
        if (it->second.last_used_ms < oldest->second.last_used_ms) oldest = it;
      if (total <= opt_.session_bytes && now - oldest->second.last_used_ms <= opt_.session_ttl_ms) break;
      total -= oldest->second.state.ByteSize();
      sessions_.erase(oldest);
    }
  }
  if (metrics_) metrics_->requests_ok.Increment();
  if (puts.empty()) {
    seq->stream->Finish(Status::Ok(), reason, usage);
    return;
  }
  // The stream ends only once the store has the units (read-your-writes: a client's next turn,
  // sent the moment this one ends, hits all of it). Off the step loop: the batch goes on meanwhile.
  const CacheNamespace ns{seq->ns, model_.fingerprint(), kUnitFormatVersion};
  io_->Schedule([this, ns, puts = std::move(puts), stream = seq->stream, reason, usage] {
    cache_->Put(ns, puts);
    stream->Finish(Status::Ok(), reason, usage);
  });
}

}  // namespace ds41
