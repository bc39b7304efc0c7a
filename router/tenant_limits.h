// Per-tenant fairness (docs/security.md): each tenant's own share of in-flight requests and a token
// bucket of its tokens per minute, checked on arrival beside the router's --max-running, so one
// tenant's flood takes at most its share and the others keep being served. The tenants and their
// quotas are the tenant file's (TenantTable::Quotas), a fixed set: the metrics are labelled by
// tenant name, never by key. Thread-safe; the set is never changed after construction.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "router/tenants.h"
#include "util/mutex.h"
#include "util/status.h"
#include "util/thread_annotations.h"

namespace ds41 {

class TenantLimits {
 public:
  using Clock = std::chrono::steady_clock;
  class Place;

  // `registry` (nullable) gets ds41_router_tenant_running_requests{tenant},
  // ds41_router_tenant_tokens_total{tenant,kind=prompt|completion} and
  // ds41_router_tenant_rejections_total{tenant,reason=max_running|tokens_per_minute}.
  TenantLimits(const TenantTable& tenants, prometheus::Registry* registry);
  ~TenantLimits();

  // A place for one request of `tenant`, held until the returned Place is released or destroyed;
  // or RESOURCE_EXHAUSTED naming the tenant and the quota it is over, with *retry_after_s set
  // (max_running: 1; tokens_per_minute: until the bucket is out of debt, 1..60). A tenant the file
  // does not name (none can resolve to one) has no quota.
  StatusOr<std::unique_ptr<Place>> Admit(const std::string& tenant, int* retry_after_s, Clock::time_point now = Clock::now());
  enum class Tokens { kPrompt, kCompletion };
  // Tokens `tenant` used (a prompt when it is routed, a reply's tokens when it ends), taken from its
  // bucket: a request is admitted while the bucket is not in debt, so a long prompt costs the next
  // ones, not itself, and requests arriving together are all admitted before any is charged (within
  // max_running). The debt stops at one minute's worth.
  void Charge(const std::string& tenant, Tokens kind, int64_t tokens, Clock::time_point now = Clock::now());

 private:
  struct State;
  std::unordered_map<std::string, std::unique_ptr<State>> tenants_;
};

class TenantLimits::Place {
 public:
  explicit Place(State* s) : state_(s) {}
  Place(const Place&) = delete;
  Place& operator=(const Place&) = delete;
  ~Place() { Release(); }
  void Release();  // idempotent

 private:
  State* state_;
  std::atomic<bool> released_{false};
};

}  // namespace ds41
