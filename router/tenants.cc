#include "router/tenants.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/sha256.h"

namespace ds41 {
namespace {

std::array<uint8_t, 32> KeyDigest(const std::string& key) {
  Sha256 h;
  h.Update(key);
  return h.Digest();
}

// Equal or not, in time independent of where the bytes differ.
bool ConstantTimeEqual(const std::array<uint8_t, 32>& a, const std::array<uint8_t, 32>& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  // A read through volatile keeps the compiler from turning the loop into an early exit.
  volatile uint8_t result = diff;
  return result == 0;
}

}  // namespace

StatusOr<TenantTable> TenantTable::FromJson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("tenant file: not a JSON object");
  TenantTable t;
  if (!j.contains("keys")) return t;
  if (!j["keys"].is_object()) return InvalidArgumentError("tenant file: \"keys\" must be an object");
  for (const auto& [key, v] : j["keys"].items()) {
    if (key.empty() || !v.is_object() || !v.contains("tenant") || !v["tenant"].is_string()) {
      return InvalidArgumentError("tenant file: each key maps to {\"tenant\": name, \"salt\": optional}");
    }
    Tenant tenant;
    tenant.name = v["tenant"].get<std::string>();
    tenant.salt = v.contains("salt") && v["salt"].is_string() ? v["salt"].get<std::string>() : tenant.name;
    if (v.contains("max_prompt_tokens")) {
      if (!v["max_prompt_tokens"].is_number_integer() || v["max_prompt_tokens"].get<int64_t>() < 1) {
        return InvalidArgumentError("tenant file: \"max_prompt_tokens\" of " + tenant.name + " must be a positive integer");
      }
      tenant.max_prompt_tokens = v["max_prompt_tokens"].get<int64_t>();
    }
    t.quotas_.emplace(tenant.name, TenantQuota{});
    t.keys_.emplace_back(KeyDigest(key), std::move(tenant));
  }
  if (!j.contains("tenants")) return t;
  if (!j["tenants"].is_object()) return InvalidArgumentError("tenant file: \"tenants\" must be an object");
  for (const auto& [name, v] : j["tenants"].items()) {
    auto it = t.quotas_.find(name);
    if (it == t.quotas_.end()) {
      return InvalidArgumentError("tenant file: \"tenants\" names \"" + name.substr(0, 64) + "\", which no key names");
    }
    if (!v.is_object()) return InvalidArgumentError("tenant file: the quota of " + name + " must be an object");
    for (const auto& [field, value] : v.items()) {
      int64_t* target = field == "max_running"         ? &it->second.max_running
                        : field == "tokens_per_minute" ? &it->second.tokens_per_minute
                                                       : nullptr;
      if (target == nullptr) {
        return InvalidArgumentError("tenant file: unknown quota \"" + field.substr(0, 64) + "\" of " + name +
                                    " (max_running, tokens_per_minute)");
      }
      if (!value.is_number_integer() || value.get<int64_t>() < 1) {
        return InvalidArgumentError("tenant file: \"" + field + "\" of " + name + " must be a positive integer");
      }
      *target = value.get<int64_t>();
    }
  }
  return t;
}

std::vector<std::pair<std::string, TenantQuota>> TenantTable::Quotas() const {
  if (open()) return {{"default", TenantQuota{}}};
  return {quotas_.begin(), quotas_.end()};
}

StatusOr<TenantTable> TenantTable::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read tenant file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  DS41_ASSIGN_OR_RETURN(TenantTable t, FromJson(ss.str()));
  // Fails closed: a key file that names no key would let every caller in as "default" (an empty
  // secret, a typo in its name); serving without keys is leaving --api-keys out.
  if (t.open()) return InvalidArgumentError("tenant file " + path + " holds no API key: it would serve every caller");
  return t;
}

StatusOr<Tenant> TenantTable::Resolve(const std::string& authorization) const {
  if (keys_.empty()) return Tenant{"default", ""};
  std::string key = authorization;
  if (key.rfind("Bearer ", 0) == 0) key = key.substr(7);
  const Digest d = KeyDigest(key);
  const Tenant* found = nullptr;
  for (const auto& [digest, tenant] : keys_) {  // every entry, match or not
    if (ConstantTimeEqual(digest, d)) found = &tenant;
  }
  if (key.empty() || found == nullptr) return UnauthenticatedError("missing or unknown API key");
  return *found;
}

}  // namespace ds41
