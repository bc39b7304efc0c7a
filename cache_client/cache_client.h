// CacheClient: how every role talks to the cache shards (SERVING.md §3). Units are placed by
// rendezvous (highest-random-weight) hashing of their placement key over the shards: a full unit by
// its own key, a tail by its parent, so a tail lives beside the unit it follows. Lookups ask every
// shard in parallel; deadlines and bounded retries everywhere; a shard that is down turns its units
// into misses, never into a caller error.
//
// Thread-safe: one client per process, shared by all requests.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "unit/unit_key.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace ds41 {

struct CacheClientOptions {
  std::vector<std::string> shards;  // gRPC addresses; their order does not matter, their names do
  std::chrono::milliseconds deadline{3000};
  int retries = 2;                  // extra attempts on UNAVAILABLE / DEADLINE_EXCEEDED
  std::chrono::milliseconds backoff{40};
  int io_threads = 16;
};

struct CacheNamespace {
  UnitKey id{};                     // NamespaceRoot(...)
  std::string model_fingerprint;    // hex
  uint16_t format_version = kUnitFormatVersion;

  static CacheNamespace Make(const std::string& fingerprint_hex, const std::string& tenant_salt);
};

// The longest cached prefix of a prompt: full units, then possibly a tail.
struct PrefixHit {
  int full_units = 0;
  int tail_tokens = 0;
  UnitKey tail_key{};
  int64_t tokens = 0;               // H = full_units * unit_tokens + tail_tokens
  std::vector<UnitKey> chain;       // keys of the full units hit
  int shards_down = 0;              // shards that did not answer (their units counted as misses)
};

struct UnitPut {
  UnitKey key{};
  std::optional<UnitKey> parent;    // tails only
  std::string bytes;
};

struct UnitGet {
  UnitKey key{};
  std::optional<UnitKey> parent;    // tails only (placement)
};

struct PutResult {
  int acked = 0, failed = 0;
  Status first_error;
};

class CacheClient {
 public:
  static StatusOr<std::unique_ptr<CacheClient>> Create(const CacheClientOptions& options);
  ~CacheClient();

  PrefixHit LookupPrefix(const CacheNamespace& ns, const std::vector<int32_t>& tokens, int unit_tokens);
  PutResult Put(const CacheNamespace& ns, const std::vector<UnitPut>& units);
  // One entry per request, nullopt when missing or its shard is down.
  std::vector<std::optional<std::string>> Get(const CacheNamespace& ns, const std::vector<UnitGet>& units);
  StatusOr<uint64_t> DeleteNamespace(const CacheNamespace& ns);

  int shards() const;
  int OwnerOf(const UnitKey& placement) const;  // rendezvous

 private:
  struct Shard;
  CacheClient() = default;
  std::vector<std::unique_ptr<Shard>> shards_;
  CacheClientOptions opt_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace ds41
