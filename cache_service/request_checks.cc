#include "cache_service/request_checks.h"

#include <cstring>

#include "unit/reply_record.h"

namespace ds41 {

bool ToKey(std::string_view bytes, Key32* k) {
  if (bytes.size() != 32) return false;
  std::memcpy(k->data(), bytes.data(), 32);
  return true;
}

Status RequestChecks::CheckNamespace(const NamespaceFields& ns, Key32* id) const {
  Fingerprint model;
  return CheckNamespace(ns, id, &model);
}

Status RequestChecks::CheckNamespace(const NamespaceFields& ns, Key32* id, Fingerprint* model) const {
  if (!ToKey(ns.id, id)) return InvalidArgumentError("namespace id must be 32 bytes");
  if (ns.format_version != kUnitFormatVersion)
    return InvalidArgumentError("unit format version " + std::to_string(ns.format_version) + " is not served here (" +
                                std::to_string(kUnitFormatVersion) + ")");
  auto fp = ParseFingerprint(ns.model_fingerprint);
  if (!fp.ok()) return InvalidArgumentError("namespace model fingerprint is malformed");
  *model = *fp;
  if (!fingerprint_.empty() && ns.model_fingerprint != fingerprint_)
    return InvalidArgumentError("foreign namespace: this cache serves model " + fingerprint_.substr(0, 12) + "..., not " +
                                std::string(ns.model_fingerprint.substr(0, 12)) + "...");
  return Status::Ok();
}

Status RequestChecks::CheckKeyCount(size_t keys) const {
  return keys > max_keys_ ? InvalidArgumentError("too many keys") : Status::Ok();
}

StatusOr<CheckedPut> RequestChecks::CheckPut(const NamespaceFields& ns, std::string_view key, std::string_view parent,
                                             std::string_view unit) const {
  CheckedPut p;
  Fingerprint model;
  if (Status s = CheckNamespace(ns, &p.ns, &model); !s.ok()) return s;
  if (!ToKey(key, &p.key)) return InvalidArgumentError("unit key must be 32 bytes");
  p.tail = !parent.empty();
  if (p.tail && !ToKey(parent, &p.parent)) return InvalidArgumentError("parent key must be 32 bytes");
  if (unit.size() > kMaxUnitBytes) return InvalidArgumentError("unit exceeds " + std::to_string(kMaxUnitBytes) + " bytes");
  // A unit, or a reply record (unit/reply_record.h) riding beside the units: same budget, TTL and
  // namespace, filed as a full unit.
  auto h = VerifyStoredBytes(unit);
  if (!h.ok()) return InvalidArgumentError("malformed unit: " + h.status().message());
  if (h->tail != p.tail) return InvalidArgumentError("a tail unit needs a parent key, and a full unit or reply record none");
  if (model != h->model) return InvalidArgumentError("unit was made by another model than its namespace");
  p.tokens = h->tokens;
  return p;
}

}  // namespace ds41
