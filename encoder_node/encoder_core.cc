#include "encoder_node/encoder_core.h"

#include <chrono>

#include "util/clock.h"

namespace ds41 {

std::string SwaPoolKey(const UnitKey& ns, const UnitKey& prefix_key) {
  return KeyString(ns) + KeyString(prefix_key);
}

EncoderCore::EncoderCore(const Model& model, CacheClient* cache, SwaFetcher fetcher, EncoderOptions options,
                         NodeMetrics* metrics, ThreadPool* compute)
    : model_(model),
      engine_(model, compute),
      cache_(cache),
      fetcher_(std::move(fetcher)),
      opt_(options),
      metrics_(metrics),
      swa_pool_(options.swa_pool_bytes, options.swa_ttl_ms),
      io_(std::make_unique<ThreadPool>(4)),
      scheduler_([this] { SchedulerLoop(); }) {}

EncoderCore::~EncoderCore() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  scheduler_.join();
}

int64_t EncoderCore::queued_tokens() const {
  std::lock_guard<std::mutex> l(mu_);
  int64_t n = 0;
  for (const Pending* p : queue_) n += p->job->remaining();
  for (const Pending* p : active_) n += p->job->remaining();
  return n;
}

int64_t EncoderCore::running() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<int64_t>(active_.size() + queue_.size());
}

void EncoderCore::SchedulerLoop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !queue_.empty() || !active_.empty(); });
    if (stop_) {
      for (Pending* p : queue_) p->done.set_value(UnavailableError("encoder shutting down"));
      for (Pending* p : active_) p->done.set_value(UnavailableError("encoder shutting down"));
      return;
    }
    while (!queue_.empty()) {
      active_.push_back(queue_.front());
      queue_.pop_front();
    }
    // Share one step's token budget among the active prefills, oldest first.
    std::vector<EncodeJob*> jobs;
    std::vector<int64_t> counts;
    int64_t budget = opt_.step_tokens;
    for (Pending* p : active_) {
      if (budget <= 0) break;
      const int64_t take = std::min(budget, p->job->remaining());
      jobs.push_back(p->job);
      counts.push_back(take);
      budget -= take;
    }
    if (metrics_) {
      metrics_->running.Set(static_cast<double>(active_.size()));
      int64_t q = 0;
      for (Pending* p : active_) q += p->job->remaining();
      metrics_->queued_tokens.Set(static_cast<double>(q));
    }
    l.unlock();
    const Status s = engine_.EncodeStep(jobs, counts);
    if (metrics_) metrics_->batch_tokens.Observe(static_cast<double>(opt_.step_tokens - budget));
    l.lock();
    for (auto it = active_.begin(); it != active_.end();) {
      Pending* p = *it;
      const bool in_step = std::find(jobs.begin(), jobs.end(), p->job) != jobs.end();
      if (!s.ok() && in_step) {
        p->done.set_value(s);
        it = active_.erase(it);
      } else if (p->job->remaining() == 0) {
        p->done.set_value(Status::Ok());
        it = active_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

int64_t EncoderCore::LoadPrefix(const PrefillInput& in, SequenceState* st) {
  const int U = in.unit_tokens;
  const int64_t H = in.cached_tokens;
  if (H == 0 || cache_ == nullptr) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  const CacheNamespace ns{in.ns, model_.fingerprint(), kUnitFormatVersion};
  std::vector<int32_t> head(in.tokens.begin(), in.tokens.begin() + H);
  const std::vector<UnitKey> chain = ChainKeys(in.ns, head, U);
  std::vector<UnitGet> gets;
  for (const UnitKey& k : chain) gets.push_back({k, std::nullopt});
  const int64_t full = static_cast<int64_t>(chain.size()) * U;
  if (full < H) {
    const UnitKey parent = chain.empty() ? in.ns : chain.back();
    gets.push_back({TailKey(parent, head.data() + full, static_cast<size_t>(H - full)), parent});
  }
  auto got = cache_->Get(ns, gets);
  auto layout = UnitLayout::FromConfig(model_.config(), U);
  std::vector<Unit> units;
  int64_t reach = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < got.size() && layout.ok(); ++i) {
    if (!got[i]) break;
    auto u = DecodeUnit(*layout, *got[i]);
    if (!u.ok() || u->first_position != reach) break;
    bytes += got[i]->size();
    reach += u->tokens;
    units.push_back(std::move(*u));
  }
  if (!units.empty() && !ApplyUnits(*layout, units, st).ok()) return 0;
  if (metrics_) {
    metrics_->kv_bytes_in.Increment(static_cast<double>(bytes));
    metrics_->kv_transfer_seconds.Observe(SecondsSince(t0));
  }
  return reach;
}

StatusOr<PrefillOutput> EncoderCore::Prefill(const PrefillInput& in) {
  const ModelConfig& c = model_.config();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t N = static_cast<int64_t>(in.tokens.size());
  if (N == 0) return InvalidArgumentError("prefill: empty prompt");
  if (in.cached_tokens < 0 || in.cached_tokens >= N) return InvalidArgumentError("prefill: cached_tokens must be in [0, N)");
  DS41_RETURN_IF_ERROR(UnitLayout::FromConfig(c, in.unit_tokens).status());
  for (int32_t t : in.tokens)
    if (t < 0 || t >= c.vocab_size) return InvalidArgumentError("prefill: token " + std::to_string(t) + " outside the vocabulary");

  SequenceState st = SequenceState::Create(c);
  PrefillOutput out;
  const int64_t H = LoadPrefix(in, &st);
  out.cached_tokens = H;
  const TokenSpan prompt{in.tokens, {}, {}};
  if (H == 0) {
    out.swa_source = "none";
  } else {
    const UnitKey pk = PrefixKey(in.ns, in.tokens, H, in.unit_tokens);
    std::optional<std::string> swa = swa_pool_.Get(SwaPoolKey(in.ns, pk));
    out.swa_source = "local";
    if (!swa && !in.swa_peer.empty() && fetcher_) {
      auto fetched = fetcher_(in.swa_peer, in.ns, pk, H);
      if (fetched.ok()) {
        swa = std::move(*fetched);
        out.swa_source = "peer";
        if (metrics_) metrics_->kv_bytes_in.Increment(static_cast<double>(swa->size()));
      }
    }
    if (swa && st.RestoreSwa(*swa, c).ok()) {
      // the exact SWA state: no replay
    } else {
      const int64_t start = std::max<int64_t>(0, H - c.window_size);
      DS41_RETURN_IF_ERROR(engine_.EncoderReplay(&st, prompt, start));
      out.swa_source = "replay";
      out.replay_tokens = H - start;
    }
  }
  if (metrics_) {
    if (out.swa_source == "local") metrics_->swa_local.Increment();
    if (out.swa_source == "peer") metrics_->swa_peer.Increment();
    if (out.swa_source == "replay") metrics_->swa_replay.Increment();
    if (out.swa_source == "none") metrics_->swa_none.Increment();
    metrics_->cached_tokens.Increment(static_cast<double>(H));
    metrics_->computed_replay.Increment(static_cast<double>(out.replay_tokens));
  }

  TokenSpan rest{std::vector<int32_t>(in.tokens.begin() + H, in.tokens.end()), {}, {}};
  EncodeJob job;
  DS41_RETURN_IF_ERROR(engine_.BeginEncode(&st, std::move(rest), &job));
  Pending pending{&job, {}};
  std::future<Status> done = pending.done.get_future();
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(&pending);
  }
  cv_.notify_all();
  DS41_RETURN_IF_ERROR(done.get());
  DS41_ASSIGN_OR_RETURN(EncoderHandoff handoff, engine_.FinishEncode(&job));
  out.computed_tokens = N - H;
  out.handoff = SerializeHandoff(handoff);

  DS41_ASSIGN_OR_RETURN(UnitLayout layout, UnitLayout::FromConfig(c, in.unit_tokens));
  DS41_ASSIGN_OR_RETURN(Fingerprint fp, ParseFingerprint(model_.fingerprint()));
  const int64_t from = H / in.unit_tokens * in.unit_tokens;
  DS41_ASSIGN_OR_RETURN(out.units, BuildUnits(c, layout, fp, st, in.tokens, in.ns, from, N));
  out.swa = st.SerializeSwa(c);
  swa_pool_.Put(SwaPoolKey(in.ns, PrefixKey(in.ns, in.tokens, N, in.unit_tokens)), out.swa);
  if (cache_) {
    // The store learns the new units in the background; the decoder gets them in the response.
    std::vector<UnitPut> puts;
    for (const BuiltUnit& b : out.units) puts.push_back({b.key, b.parent, b.bytes});
    const CacheNamespace ns{in.ns, model_.fingerprint(), kUnitFormatVersion};
    io_->Schedule([this, ns, puts = std::move(puts)] { cache_->Put(ns, puts); });
  }
  if (metrics_) {
    metrics_->computed_new.Increment(static_cast<double>(out.computed_tokens));
    metrics_->prefill_seconds.Observe(SecondsSince(t0));
    metrics_->resident_swa.Set(static_cast<double>(swa_pool_.bytes()));
    uint64_t bytes = out.swa.size() + out.handoff.size();
    for (const BuiltUnit& b : out.units) bytes += b.bytes.size();
    metrics_->kv_bytes_out.Increment(static_cast<double>(bytes));
  }
  return out;
}

std::optional<std::string> EncoderCore::GetSwa(const UnitKey& ns, const UnitKey& prefix_key) {
  return swa_pool_.Get(SwaPoolKey(ns, prefix_key));
}

}  // namespace ds41
