#include "encoder_node/encoder_core.h"

#include <algorithm>
#include <chrono>

#include "node_client/node_codec.h"
#include "unit/state_units.h"
#include "util/clock.h"
#include "util/thread_scratch.h"

namespace ds41 {

EncoderCore::EncoderCore(const Model& model, CacheClient* cache, SwaFetcher fetcher, EncoderOptions options,
                         NodeMetrics* metrics, ThreadPool* compute)
    : model_(model),
      engine_(model, compute),
      fetcher_(std::move(fetcher)),
      opt_(options),
      metrics_(metrics),
      swa_pool_(options.swa_pool_bytes, options.swa_ttl_ms),
      loader_(model, cache, metrics),
      persister_(model, cache, metrics),
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
    DropCancelledLocked();
    while (!queue_.empty()) {
      active_.push_back(queue_.front());
      queue_.pop_front();
    }
    if (metrics_) {
      metrics_->running.Set(static_cast<double>(active_.size()));
      int64_t q = 0;
      for (Pending* p : active_) q += p->job->remaining();
      metrics_->queued_tokens.Set(static_cast<double>(q));
    }
    if (active_.empty()) continue;  // every one was cancelled
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
    if (metrics_ && active_.empty() && queue_.empty()) {
      metrics_->running.Set(0);  // no next step would say so
      metrics_->queued_tokens.Set(0);
    }
  }
}

void EncoderCore::DropCancelledLocked() {
  auto cancelled = [](Pending* p) {
    if (p->cancel == nullptr || !p->cancel->cancelled()) return false;
    p->done.set_value(CancelledError("prefill cancelled"));
    return true;
  };
  queue_.erase(std::remove_if(queue_.begin(), queue_.end(), cancelled), queue_.end());
  active_.erase(std::remove_if(active_.begin(), active_.end(), cancelled), active_.end());
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

StatusOr<PrefillOutput> EncoderCore::Prefill(const PrefillInput& in, CancelToken* cancel) {
  // This request thread runs a pass only for a replay or an image: its scratch goes when it is done.
  ScratchReleaser release_scratch;
  const ModelConfig& c = model_.config();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t N = static_cast<int64_t>(in.tokens.size());
  DS41_RETURN_IF_ERROR(CheckPrefillInput(in, c));

  SequenceState st = SequenceState::Create(c);
  PrefillOutput out;
  // The cache keys hold the images' key tokens; the engine sees the image token and the tower's rows.
  EnginePrompt prompt(engine_, c, in.tokens, in.images);
  const int64_t H = loader_.Load(in.ns, in.tokens, in.cached_tokens, in.unit_tokens, &st);
  out.cached_tokens = H;
  if (H == 0) {
    out.swa_source = "none";
  } else {
    DS41_RETURN_IF_ERROR(RestoreSwa(in, H, &prompt, &st, &out));
  }
  if (metrics_) {
    if (out.swa_source == "local") metrics_->swa_local.Increment();
    if (out.swa_source == "peer") metrics_->swa_peer.Increment();
    if (out.swa_source == "replay") metrics_->swa_replay.Increment();
    if (out.swa_source == "none") metrics_->swa_none.Increment();
    metrics_->cached_tokens.Increment(static_cast<double>(H));
    metrics_->computed_replay.Increment(static_cast<double>(out.replay_tokens));
  }

  DS41_ASSIGN_OR_RETURN(TokenSpan whole, prompt.From(H));
  TokenSpan rest = whole.Slice(static_cast<size_t>(H), whole.tokens.size(), c.dim);
  if (metrics_ && prompt.images_encoded() > 0) metrics_->images_encoded.Increment(prompt.images_encoded());
  EncodeJob job;
  DS41_RETURN_IF_ERROR(engine_.BeginEncode(&st, std::move(rest), &job));
  Pending pending{&job, cancel, {}};
  std::future<Status> done = pending.done.get_future();
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(&pending);
  }
  cv_.notify_all();
  if (const Status s = done.get(); !s.ok()) {
    // Out of the scheduler's hands now: what it encoded is this thread's to keep.
    if (s.code() == StatusCode::kCancelled) KeepEncodedUnits(in, st, H, job.done);
    return s;
  }
  DS41_ASSIGN_OR_RETURN(EncoderHandoff handoff, engine_.FinishEncode(&job));
  out.computed_tokens = N - H;
  out.handoff = SerializeHandoff(handoff);

  const int64_t from = H / in.unit_tokens * in.unit_tokens;
  DS41_ASSIGN_OR_RETURN(std::vector<BuiltUnit> units, persister_.Build(in.ns, st, in.tokens, from, N, in.unit_tokens));
  out.units.reserve(units.size());
  for (const BuiltUnit& b : units) out.units.push_back(b.bytes);
  out.swa = st.SerializeSwa(c);
  swa_pool_.Put(SwaPoolKey(in.ns, PrefixKey(in.ns, in.tokens, N, in.unit_tokens)), out.swa);
  // The store learns the new units in the background; the decoder gets them in the response.
  persister_.Put(in.ns, std::move(units));
  if (metrics_) {
    metrics_->computed_new.Increment(static_cast<double>(out.computed_tokens));
    metrics_->prefill_seconds.Observe(SecondsSince(t0));
    metrics_->resident_swa.Set(static_cast<double>(swa_pool_.bytes()));
    uint64_t bytes = out.swa.size() + out.handoff.size();
    for (const std::string& u : out.units) bytes += u.size();
    metrics_->kv_bytes_out.Increment(static_cast<double>(bytes));
  }
  return out;
}

}  // namespace ds41
