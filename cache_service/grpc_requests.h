// The cache service's gRPC handlers, first half: each request message checked and turned into what
// its handler executes (STYLE.md §13: validate, then execute). Everything here is pure, so the fuzz
// harness (fuzz/grpc_request_fuzzer.cc) runs exactly the handlers' checks on messages parsed from
// arbitrary bytes. Every refusal is INVALID_ARGUMENT naming the field.
// Thread-safe: pure functions over an immutable RequestChecks.
#pragma once

#include <vector>

#include "cache.pb.h"
#include "cache_service/request_checks.h"
#include "util/status.h"

namespace ds41 {

// A Get's or a Lookup's namespace and keys, checked (32 bytes each, at most max_keys_per_request).
struct CheckedKeys {
  Key32 ns{};
  std::vector<Key32> keys;
};

StatusOr<CheckedPut> CheckPutRequest(const RequestChecks& checks, const ds41::cache::v1::PutRequest& req);
StatusOr<CheckedKeys> CheckGetRequest(const RequestChecks& checks, const ds41::cache::v1::GetRequest& req);
// Also refuses first_is_root without keys.
StatusOr<CheckedKeys> CheckLookupRequest(const RequestChecks& checks, const ds41::cache::v1::LookupRequest& req);
// The namespace id.
StatusOr<Key32> CheckDeleteNamespaceRequest(const RequestChecks& checks,
                                            const ds41::cache::v1::DeleteNamespaceRequest& req);

}  // namespace ds41
