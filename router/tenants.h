// API keys -> tenants (SERVING.md §7 security). A tenant's cache salt namespaces its units, so one
// tenant can never hit, or probe for, another's prefixes. With no keys configured the router is
// open and every request is the "default" tenant with an empty salt. Keys are kept as SHA-256
// digests and a presented key is compared against every one in constant time, so neither the
// comparison nor the table's order tells an attacker how much of a key they guessed
// (docs/security.md). Thread-safe once loaded: Resolve only reads.
#pragma once

#include <array>
#include <cstdint>
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

class TenantTable {
 public:
  // JSON: {"keys": {"<api key>": {"tenant": "acme", "salt": "...", "max_prompt_tokens": 32768}}}; salt
  // defaults to the tenant name, max_prompt_tokens to the model's context.
  static StatusOr<TenantTable> FromJson(const std::string& json);
  // A tenant file must hold at least one key (INVALID_ARGUMENT otherwise): no file is how a router
  // serves without keys.
  static StatusOr<TenantTable> Load(const std::string& path);

  // `authorization`: the Authorization header value ("Bearer <key>") or the bare key (gRPC).
  // UNAUTHENTICATED when keys are configured and the
  // key is missing or unknown.
  StatusOr<Tenant> Resolve(const std::string& authorization) const;
  bool open() const { return keys_.empty(); }

 private:
  using Digest = std::array<uint8_t, 32>;
  std::vector<std::pair<Digest, Tenant>> keys_;
};

}  // namespace ds41
