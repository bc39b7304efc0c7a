// API keys -> tenants (SERVING.md §7 security). A tenant's cache salt namespaces its units, so one
// tenant can never hit, or probe for, another's prefixes. With no keys configured the router is
// open and every request is the "default" tenant with an empty salt. Keys are kept as SHA-256
// digests and a presented key is compared against every one in constant time, so neither the
// comparison nor the table's order tells an attacker how much of a key they guessed
// (docs/security.md). Thread-safe once loaded: Resolve only reads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace ds41 {

struct Tenant {
  std::string name;
  std::string salt;
  int64_t max_prompt_tokens = 0;  // longest prompt this tenant may send (0: the model's context)
};

// A tenant's share of the router (tenant_limits.h enforces it); 0: no limit of its own.
struct TenantQuota {
  int64_t max_running = 0;        // its requests in flight at once, within the router's --max-running
  int64_t tokens_per_minute = 0;  // prompt and completion tokens, as a bucket of one minute's worth
};

class TenantTable {
 public:
  // JSON: {"keys": {"<api key>": {"tenant": "acme", "salt": "...", "max_prompt_tokens": 32768}},
  //        "tenants": {"acme": {"max_running": 64, "tokens_per_minute": 200000}}}; salt defaults to
  // the tenant name, max_prompt_tokens to the model's context; "tenants" (optional) gives quotas to
  // tenants its keys name (a quota for a tenant no key names is refused: a typo would limit nobody).
  static StatusOr<TenantTable> FromJson(const std::string& json);
  // A tenant file must hold at least one key (INVALID_ARGUMENT otherwise): no file is how a router
  // serves without keys.
  static StatusOr<TenantTable> Load(const std::string& path);

  // `authorization`: the Authorization header value ("Bearer <key>") or the bare key (gRPC).
  // UNAUTHENTICATED when keys are configured and the
  // key is missing or unknown.
  StatusOr<Tenant> Resolve(const std::string& authorization) const;
  bool open() const { return keys_.empty(); }
  // Every tenant a request can resolve to ("default" when open), each once, with its quota: a fixed
  // set, so metrics may be labelled by these names.
  std::vector<std::pair<std::string, TenantQuota>> Quotas() const;

 private:
  using Digest = std::array<uint8_t, 32>;
  std::vector<std::pair<Digest, Tenant>> keys_;
  std::map<std::string, TenantQuota> quotas_;  // every tenant its keys name
};

}  // namespace ds41
