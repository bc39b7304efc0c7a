// The cache service's request validation, shared by the gRPC handlers and the bulk data path so
// both accept exactly the same requests: namespace (id, unit format, fingerprint, this server's
// model), keys, key counts and unit bytes (size, framing, checksum, tail/parent, model); a reply
// record (unit/reply_record.h) is checked as one and stored like a full unit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cache_service/store/unit_store.h"
#include "unit/unit_format.h"
#include "util/status.h"

namespace ds41 {

// A namespace as it arrives, before any check (protobuf fields or data-path frame fields).
struct NamespaceFields {
  std::string_view id;
  std::string_view model_fingerprint;
  uint32_t format_version = 0;
};

// A put that passed every check: what UnitStore::Put takes.
struct CheckedPut {
  Key32 ns{}, key{}, parent{};
  bool tail = false;
  uint32_t tokens = 0;
  const Key32* parent_or_null() const { return tail ? &parent : nullptr; }
  UnitStore::PutItem Item(std::string_view unit) const { return {ns, key, parent_or_null(), tokens, unit}; }
};

// Store calls (UnitStore::PutMany) one put stream, a gRPC Put or a data-path connection, keeps
// running at once; the puts that arrive meanwhile wait and go together in the next one.
inline constexpr int kPutCallsPerStream = 2;

// Copies a 32-byte key; false when `bytes` is not 32 bytes long.
bool ToKey(std::string_view bytes, Key32* key);

// Thread-safe (immutable).
class RequestChecks {
 public:
  // `model_fingerprint`: accept only this model ("" = any).
  RequestChecks(std::string model_fingerprint, size_t max_keys_per_request)
      : fingerprint_(std::move(model_fingerprint)), max_keys_(max_keys_per_request) {}

  // The namespace's id, or INVALID_ARGUMENT naming what is wrong.
  Status CheckNamespace(const NamespaceFields& ns, Key32* id) const;
  // INVALID_ARGUMENT when a request names more keys than one request may.
  Status CheckKeyCount(size_t keys) const;
  // A put of `unit` under `key` (`parent` empty for a full unit), or INVALID_ARGUMENT.
  StatusOr<CheckedPut> CheckPut(const NamespaceFields& ns, std::string_view key, std::string_view parent,
                                std::string_view unit) const;

  size_t max_keys_per_request() const { return max_keys_; }

 private:
  // CheckNamespace, also giving the namespace's model fingerprint as parsed.
  Status CheckNamespace(const NamespaceFields& ns, Key32* id, Fingerprint* model) const;

  std::string fingerprint_;
  size_t max_keys_;
};

}  // namespace ds41
