#include "router/tenant_limits.h"

#include <algorithm>
#include <cmath>

namespace ds41 {

struct TenantLimits::State {
  std::string name;
  TenantQuota quota;
  std::atomic<int64_t> running{0};
  Mutex mu;
  double bucket DS41_GUARDED_BY(mu) = 0;  // tokens left of one minute's worth; < 0: in debt
  Clock::time_point refilled DS41_GUARDED_BY(mu){};
  prometheus::Gauge* running_gauge = nullptr;
  prometheus::Counter *prompt_tokens = nullptr, *completion_tokens = nullptr;
  prometheus::Counter *refused_running = nullptr, *refused_tokens = nullptr;

  double PerSecond() const { return static_cast<double>(quota.tokens_per_minute) / 60.0; }

  // The bucket filled for the time since it last was (capacity: one minute's worth).
  void Refill(Clock::time_point now) DS41_REQUIRES(mu) {
    const double elapsed = std::chrono::duration<double>(now - refilled).count();
    if (elapsed > 0) {
      bucket = std::min(static_cast<double>(quota.tokens_per_minute), bucket + elapsed * PerSecond());
      refilled = now;
    }
  }
};

TenantLimits::TenantLimits(const TenantTable& tenants, prometheus::Registry* registry) {
  prometheus::Family<prometheus::Gauge>* running = nullptr;
  prometheus::Family<prometheus::Counter>*tokens = nullptr, *rejections = nullptr;
  if (registry != nullptr) {
    running = &prometheus::BuildGauge()
                   .Name("ds41_router_tenant_running_requests")
                   .Help("A tenant's requests in flight (its share: max_running in the tenant file)")
                   .Register(*registry);
    tokens = &prometheus::BuildCounter()
                  .Name("ds41_router_tenant_tokens_total")
                  .Help("A tenant's tokens by kind (prompt, completion), as its tokens_per_minute counts them")
                  .Register(*registry);
    rejections = &prometheus::BuildCounter()
                      .Name("ds41_router_tenant_rejections_total")
                      .Help("A tenant's requests refused for its own quota (max_running, tokens_per_minute)")
                      .Register(*registry);
  }
  const Clock::time_point now = Clock::now();
  for (const auto& [name, quota] : tenants.Quotas()) {
    auto s = std::make_unique<State>();
    s->name = name;
    s->quota = quota;
    {
      MutexLock l(&s->mu);
      s->bucket = static_cast<double>(quota.tokens_per_minute);  // starts full
      s->refilled = now;
    }
    if (registry != nullptr) {
      s->running_gauge = &running->Add({{"tenant", name}});
      s->prompt_tokens = &tokens->Add({{"tenant", name}, {"kind", "prompt"}});
      s->completion_tokens = &tokens->Add({{"tenant", name}, {"kind", "completion"}});
      s->refused_running = &rejections->Add({{"tenant", name}, {"reason", "max_running"}});
      s->refused_tokens = &rejections->Add({{"tenant", name}, {"reason", "tokens_per_minute"}});
    }
    tenants_.emplace(name, std::move(s));
  }
}

TenantLimits::~TenantLimits() = default;

StatusOr<std::unique_ptr<TenantLimits::Place>> TenantLimits::Admit(const std::string& tenant, int* retry_after_s,
                                                                    Clock::time_point now) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return std::unique_ptr<Place>();
  State& s = *it->second;
  if (s.quota.tokens_per_minute > 0) {
    MutexLock l(&s.mu);
    s.Refill(now);
    if (s.bucket < 0) {
      if (s.refused_tokens) s.refused_tokens->Increment();
      *retry_after_s = static_cast<int>(std::clamp(std::ceil(-s.bucket / s.PerSecond()), 1.0, 60.0));
      return ResourceExhaustedError("tenant " + s.name + " is over its tokens_per_minute (" +
                                    std::to_string(s.quota.tokens_per_minute) + ")");
    }
  }
  if (s.running.fetch_add(1) >= s.quota.max_running && s.quota.max_running > 0) {
    s.running.fetch_sub(1);
    if (s.refused_running) s.refused_running->Increment();
    *retry_after_s = 1;
    return ResourceExhaustedError("tenant " + s.name + " has " + std::to_string(s.quota.max_running) +
                                  " requests in flight (its max_running)");
  }
  if (s.running_gauge) s.running_gauge->Increment();
  return std::make_unique<Place>(&s);
}

void TenantLimits::Charge(const std::string& tenant, Tokens kind, int64_t tokens, Clock::time_point now) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end() || tokens <= 0) return;
  State& s = *it->second;
  prometheus::Counter* counter = kind == Tokens::kPrompt ? s.prompt_tokens : s.completion_tokens;
  if (counter) counter->Increment(static_cast<double>(tokens));
  if (s.quota.tokens_per_minute <= 0) return;
  MutexLock l(&s.mu);
  s.Refill(now);
  // Debt is floored at one minute's worth: a burst admitted together (each checked before its
  // prompt was charged) locks the tenant out for at most a minute, which Retry-After can say.
  s.bucket = std::max(s.bucket - static_cast<double>(tokens), -static_cast<double>(s.quota.tokens_per_minute));
}

void TenantLimits::Place::Release() {
  if (state_ == nullptr || released_.exchange(true)) return;
  state_->running.fetch_sub(1);
  if (state_->running_gauge) state_->running_gauge->Decrement();
}

}  // namespace ds41
