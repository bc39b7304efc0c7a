#include "encoder_node/encoder_core.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "node_client/node_codec.h"
#include "unit/state_units.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/thread_scratch.h"

namespace ds41 {

struct EncoderCore::Prefilling {
  PrefillInput in;
  std::shared_ptr<CancelToken> cancel;  // may be null
  PrefillDone done;
  std::chrono::steady_clock::time_point t0;
  SequenceState st;
  std::optional<EnginePrompt> prompt;  // over in.tokens and in.images, for as long as the job runs
  PrefillOutput out;
  int64_t H = 0;
  EncodeJob job;
};

EncoderCore::EncoderCore(const Model& model, CacheClient* cache, SwaFetcher fetcher, EncoderOptions options,
                         NodeMetrics* metrics, const NodeExecutors& pools)
    : model_(model),
      engine_(model, pools.compute),
      fetcher_(std::move(fetcher)),
      opt_(options),
      metrics_(metrics),
      swa_pool_(options.swa_pool_bytes, options.swa_ttl_ms),
      loader_(model, cache, metrics),
      persister_(model, cache, metrics, pools.io),
      requests_(pools.requests),
      scheduler_([this] { SchedulerLoop(); }) {}

EncoderCore::~EncoderCore() {
  std::deque<std::shared_ptr<Prefilling>> waiting;
  {
    MutexLock l(&admit_mu_);
    closing_ = true;
    waiting.swap(waiting_);
  }
  for (const auto& p : waiting) p->done(UnavailableError("encoder shutting down"));
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  scheduler_.join();  // what it held is answered UNAVAILABLE, on the requests pool
  MutexLock l(&admit_mu_);
  admit_cv_.Wait(&admit_mu_, [this]() DS41_REQUIRES(admit_mu_) { return admitted_ == 0; });
}

int64_t EncoderCore::queued_tokens() const {
  MutexLock l(&mu_);
  int64_t n = 0;
  for (const auto& p : queue_) n += p->job.remaining();
  for (const auto& p : active_) n += p->job.remaining();
  return n;
}

int64_t EncoderCore::running() const {
  MutexLock l(&mu_);
  return static_cast<int64_t>(active_.size() + queue_.size());
}

void EncoderCore::SchedulerLoop() {
  // Prefills the scheduler is done with, answered outside mu_ (an inline requests pool runs the
  // answer, and the next admission, on this thread).
  std::vector<std::pair<std::shared_ptr<Prefilling>, Status>> ended;
  auto answer = [this, &ended]() DS41_REQUIRES(mu_) {
    if (ended.empty()) return;
    MutexUnlock u(&mu_);
    for (auto& [p, s] : ended) Encoded(std::move(p), std::move(s));
    ended.clear();
  };
  MutexLock l(&mu_);
  for (;;) {
    cv_.Wait(&mu_, [this]() DS41_REQUIRES(mu_) { return stop_ || !queue_.empty() || !active_.empty(); });
    if (stop_) {
      for (auto& p : queue_) ended.emplace_back(std::move(p), UnavailableError("encoder shutting down"));
      for (auto& p : active_) ended.emplace_back(std::move(p), UnavailableError("encoder shutting down"));
      queue_.clear();
      active_.clear();
      answer();
      return;
    }
    DropCancelledLocked(&ended);
    while (!queue_.empty()) {
      active_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    if (metrics_) {
      metrics_->running.Set(static_cast<double>(active_.size()));
      int64_t q = 0;
      for (const auto& p : active_) q += p->job.remaining();
      metrics_->queued_tokens.Set(static_cast<double>(q));
    }
    if (active_.empty()) {  // every one was cancelled
      answer();
      continue;
    }
    // Share one step's token budget among the active prefills, oldest first.
    std::vector<EncodeJob*> jobs;
    std::vector<int64_t> counts;
    int64_t budget = opt_.step_tokens;
    for (const auto& p : active_) {
      if (budget <= 0) break;
      const int64_t take = std::min(budget, p->job.remaining());
      jobs.push_back(&p->job);
      counts.push_back(take);
      budget -= take;
    }
    Status s;
    {
      MutexUnlock u(&mu_);
      s = engine_.EncodeStep(jobs, counts);
      if (metrics_) metrics_->batch_tokens.Observe(static_cast<double>(opt_.step_tokens - budget));
    }
    for (auto it = active_.begin(); it != active_.end();) {
      const bool in_step = std::find(jobs.begin(), jobs.end(), &(*it)->job) != jobs.end();
      if (!s.ok() && in_step) {
        ended.emplace_back(std::move(*it), s);
        it = active_.erase(it);
      } else if ((*it)->job.remaining() == 0) {
        ended.emplace_back(std::move(*it), Status::Ok());
        it = active_.erase(it);
      } else {
        ++it;
      }
    }
    if (metrics_ && active_.empty() && queue_.empty()) {
      metrics_->running.Set(0);  // no next step would say so
      metrics_->queued_tokens.Set(0);
    }
    answer();
  }
}

void EncoderCore::DropCancelledLocked(std::vector<std::pair<std::shared_ptr<Prefilling>, Status>>* ended) {
  auto drop = [ended](std::shared_ptr<Prefilling>& p) {
    if (p->cancel == nullptr || !p->cancel->cancelled()) return false;
    ended->emplace_back(p, CancelledError("prefill cancelled"));
    return true;
  };
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), drop), queue_.end());
  active_.erase(std::remove_if(active_.begin(), active_.end(), drop), active_.end());
}

void EncoderCore::KeepEncodedUnits(const PrefillInput& in, const SequenceState& st, int64_t H, int64_t encoded) {
  const int U = in.unit_tokens;
  const int64_t from = H / U * U;
  const int64_t to = (H + encoded) / U * U;  // whole units only: a tail needs the KV to end exactly there
  if (to <= from) return;
  auto units = persister_.Build(in.ns, st, in.tokens, from, to, U);
  if (units.ok()) persister_.Put(in.ns, std::move(*units));
}

Status EncoderCore::RestoreSwa(const PrefillInput& in, int64_t H, EnginePrompt* prompt, SequenceState* st,
                               PrefillOutput* out) {
  const ModelConfig& c = model_.config();
  const UnitKey pk = PrefixKey(in.ns, in.tokens, H, in.unit_tokens);
  std::optional<std::string> swa = swa_pool_.Get(SwaPoolKey(in.ns, pk));
  out->swa_source = "local";
  if (!swa && !in.swa_peer.empty() && fetcher_) {
    auto fetched = fetcher_(in.swa_peer, in.ns, pk, H);
    if (fetched.ok()) {
      swa = std::move(*fetched);
      out->swa_source = "peer";
      if (metrics_) metrics_->kv_bytes_in.Increment(static_cast<double>(swa->size()));
      // Kept here too: when the holder (usually the session's decoder) dies in the middle of this
      // request, its migrated attempt still finds the exact state (the router names this encoder).
      swa_pool_.Put(SwaPoolKey(in.ns, pk), *swa);
    }
  }
  if (swa && st->RestoreSwa(*swa, c).ok()) return Status::Ok();  // the exact SWA state: no replay
  const int64_t start = std::max<int64_t>(0, H - c.window_size);
  DS41_ASSIGN_OR_RETURN(TokenSpan replayed, prompt->From(start, H));
  DS41_RETURN_IF_ERROR(engine_.EncoderReplay(st, replayed, start));
  out->swa_source = "replay";
  out->replay_tokens = H - start;
  return Status::Ok();
}

void EncoderCore::PrefillAsync(PrefillInput in, std::shared_ptr<CancelToken> cancel, PrefillDone done) {
  auto p = std::make_shared<Prefilling>();
  p->in = std::move(in);
  p->cancel = std::move(cancel);
  p->done = std::move(done);
  bool closing = false;
  {
    MutexLock l(&admit_mu_);
    closing = closing_;
    if (!closing) {
      if (admitted_ >= opt_.max_admitted) {
        waiting_.push_back(std::move(p));  // admitted when one ends (Complete)
        return;
      }
      ++admitted_;
    }
  }
  if (closing) return p->done(UnavailableError("encoder shutting down"));
  requests_->Schedule([this, p] { Begin(p); });
}

StatusOr<PrefillOutput> EncoderCore::Prefill(const PrefillInput& in, CancelToken* cancel) {
  std::promise<StatusOr<PrefillOutput>> answered;
  std::future<StatusOr<PrefillOutput>> out = answered.get_future();
  PrefillAsync(in, Borrowed(cancel),
               [&answered](StatusOr<PrefillOutput> o) { answered.set_value(std::move(o)); });
  return out.get();
}

void EncoderCore::Begin(const std::shared_ptr<Prefilling>& p) {
  // This thread runs a pass only for a replay or an image: its scratch goes when it is done.
  ScratchReleaser release_scratch;
  Status s = p->cancel && p->cancel->cancelled() ? CancelledError("prefill cancelled") : Prepare(*p);
  if (s.ok()) {
    MutexLock l(&mu_);
    if (!stop_) {
      queue_.push_back(p);
      cv_.NotifyAll();
      return;
    }
    s = UnavailableError("encoder shutting down");
  }
  Complete(p, std::move(s));
}

Status EncoderCore::Prepare(Prefilling& p) {
  const ModelConfig& c = model_.config();
  const PrefillInput& in = p.in;
  p.t0 = std::chrono::steady_clock::now();
  DS41_RETURN_IF_ERROR(CheckPrefillInput(in, c));
  p.st = SequenceState::Create(c);
  PrefillOutput& out = p.out;
  // The cache keys hold the images' key tokens; the engine sees the image token and the tower's rows.
  p.prompt.emplace(engine_, c, in.tokens, in.images);
  const int64_t H = loader_.Load(in.ns, in.tokens, in.cached_tokens, in.unit_tokens, &p.st);
  p.H = H;
  out.cached_tokens = H;
  if (H == 0) {
    out.swa_source = "none";
  } else {
    DS41_RETURN_IF_ERROR(RestoreSwa(in, H, &*p.prompt, &p.st, &out));
  }
  if (metrics_) {
    if (out.swa_source == "local") metrics_->swa_local.Increment();
    if (out.swa_source == "peer") metrics_->swa_peer.Increment();
    if (out.swa_source == "replay") metrics_->swa_replay.Increment();
    if (out.swa_source == "none") metrics_->swa_none.Increment();
    metrics_->cached_tokens.Increment(static_cast<double>(H));
    metrics_->computed_replay.Increment(static_cast<double>(out.replay_tokens));
  }
  DS41_ASSIGN_OR_RETURN(TokenSpan whole, p.prompt->From(H));
  TokenSpan rest = whole.Slice(static_cast<size_t>(H), whole.tokens.size(), c.dim);
  if (metrics_ && p.prompt->images_encoded() > 0) metrics_->images_encoded.Increment(p.prompt->images_encoded());
  return engine_.BeginEncode(&p.st, std::move(rest), &p.job);
}

void EncoderCore::Encoded(std::shared_ptr<Prefilling> p, Status s) {
  requests_->Schedule([this, p = std::move(p), s = std::move(s)] {
    if (!s.ok()) {
      // Out of the scheduler's hands now: what it encoded is this prefill's to keep.
      if (s.code() == StatusCode::kCancelled) KeepEncodedUnits(p->in, p->st, p->H, p->job.done);
      return Complete(p, s);
    }
    Complete(p, Finish(*p));
  });
}

StatusOr<PrefillOutput> EncoderCore::Finish(Prefilling& p) {
  const ModelConfig& c = model_.config();
  const PrefillInput& in = p.in;
  const int64_t N = static_cast<int64_t>(in.tokens.size());
  const int64_t H = p.H;
  PrefillOutput& out = p.out;
  DS41_ASSIGN_OR_RETURN(EncoderHandoff handoff, engine_.FinishEncode(&p.job));
  out.computed_tokens = N - H;
  out.handoff = SerializeHandoff(handoff);

  const int64_t from = H / in.unit_tokens * in.unit_tokens;
  DS41_ASSIGN_OR_RETURN(std::vector<BuiltUnit> units, persister_.Build(in.ns, p.st, in.tokens, from, N, in.unit_tokens));
  out.units.reserve(units.size());
  for (const BuiltUnit& b : units) out.units.push_back(b.bytes);
  out.swa = p.st.SerializeSwa(c);
  swa_pool_.Put(SwaPoolKey(in.ns, PrefixKey(in.ns, in.tokens, N, in.unit_tokens)), out.swa);
  // The store learns the new units in the background; the decoder gets them in the response.
  persister_.Put(in.ns, std::move(units));
  if (metrics_) {
    metrics_->computed_new.Increment(static_cast<double>(out.computed_tokens));
    metrics_->prefill_seconds.Observe(SecondsSince(p.t0));
    metrics_->resident_swa.Set(static_cast<double>(swa_pool_.bytes()));
    uint64_t bytes = out.swa.size() + out.handoff.size();
    for (const std::string& u : out.units) bytes += u.size();
    metrics_->kv_bytes_out.Increment(static_cast<double>(bytes));
  }
  return std::move(out);
}

void EncoderCore::Complete(const std::shared_ptr<Prefilling>& p, StatusOr<PrefillOutput> out) {
  PrefillDone done = std::move(p->done);
  // What the prefill held (its state, its prompt's rows) goes before the next one is admitted.
  p->prompt.reset();
  p->st = SequenceState();
  done(std::move(out));
  std::shared_ptr<Prefilling> next;
  {
    MutexLock l(&admit_mu_);
    if (!waiting_.empty()) {
      next = std::move(waiting_.front());  // this admission passes to it
      waiting_.pop_front();
    } else if (--admitted_ == 0) {
      admit_cv_.NotifyAll();
    }
  }
  if (next) requests_->Schedule([this, next] { Begin(next); });
}

}  // namespace ds41
