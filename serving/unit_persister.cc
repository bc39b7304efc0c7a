#include "serving/unit_persister.h"

#include <algorithm>
#include <cstdio>

namespace ds41 {

UnitPersister::UnitPersister(const Model& model, CacheClient* cache, NodeMetrics* metrics, ThreadPool* io)
    : model_(model), cache_(cache), metrics_(metrics), max_running_(io == nullptr ? 1 : std::max(1, io->threads() / 2)), puts_(io) {}

void UnitPersister::Start(std::function<void()> put) {
  {
    MutexLock l(&queue_mu_);
    if (running_ >= max_running_) {
      queued_.push_back(std::move(put));
      return;
    }
    ++running_;
  }
  puts_.Schedule([this, put = std::move(put)]() mutable {
    for (;;) {
      put();
      MutexLock l(&queue_mu_);
      if (queued_.empty()) {
        --running_;
        return;
      }
      put = std::move(queued_.front());  // this thread's turn goes on with the next one waiting
      queued_.pop_front();
    }
  });
}

void UnitPersister::Count(const PutResult& r) {
  if (metrics_) {
    metrics_->units_put_ok.Increment(r.acked);
    metrics_->units_put_error.Increment(r.failed);
  }
  if (r.failed == 0) return;
  {
    MutexLock l(&logged_mu_);
    if (!logged_.insert(r.first_error.code()).second) return;
  }
  std::fprintf(stderr, "unit persister: the store refused %d of %d units: %s (each kind of failure is logged once; "
               "units_put_total{status=\"error\"} counts them all)\n",
               r.failed, r.acked + r.failed, r.first_error.ToString().c_str());
}

StatusOr<std::vector<BuiltUnit>> UnitPersister::Build(const UnitKey& ns, const SequenceState& state,
                                                      const std::vector<int32_t>& tokens, int64_t from, int64_t to,
                                                      int unit_tokens) const {
  DS41_ASSIGN_OR_RETURN(UnitLayout layout, UnitLayout::FromConfig(model_.config(), unit_tokens));
  DS41_ASSIGN_OR_RETURN(Fingerprint fp, ParseFingerprint(model_.fingerprint()));
  return BuildUnits(model_.config(), layout, fp, state, tokens, ns, from, to);
}

void UnitPersister::Put(const UnitKey& ns, std::vector<BuiltUnit> units, std::function<void()> then) {
  if (!cache_ || units.empty()) {
    if (then) then();
    return;
  }
  std::vector<UnitPut> puts;
  puts.reserve(units.size());
  for (BuiltUnit& b : units) puts.push_back({b.key, b.parent, std::move(b.bytes)});
  const CacheNamespace cns{ns, model_.fingerprint(), kUnitFormatVersion};
  Start([this, cns, puts = std::move(puts), then = std::move(then)] {
    Count(cache_->Put(cns, puts));
    if (then) then();
  });
}

}  // namespace ds41
