// CacheClient: how every role talks to the cache shards (SERVING.md §3). Units are placed by
// rendezvous (highest-random-weight) hashing of their placement key over the shards: a full unit by
// its own key, a tail by its parent, so a tail lives beside the unit it follows. Lookups ask every
// shard at once with asynchronous gRPC calls (no thread waits for them, retries wait on timers);
// Puts and Gets run their shards' parts on the process's I/O pool (CacheClientOptions::io). Deadlines
// and bounded retries everywhere; a shard that is down turns its units into misses, never into a
// caller error.
//
// Unit payloads (Put, Get) travel over a shard's bulk data path when it advertises one
// (docs/cache_data_path.md; pooled connections); whatever that path does not answer (down, refused,
// broken mid-stream, too large for its frames) is sent again over gRPC, with gRPC's retries. Both
// share one deadline per shard's part of a call, so a fallback never extends the call.
//
// Thread-safe: one client per process, shared by all requests. The shards and options are fixed
// after Create; a shard's in-flight count is atomic and its data path (ShardDataPath) locks itself.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "unit/unit_key.h"
#include "util/cancel_token.h"
#include "util/status.h"
#include "util/task_group.h"
#include "util/thread_pool.h"

namespace ds41 {

struct CacheClientOptions {
  std::vector<std::string> shards;  // gRPC addresses; their order does not matter, their names do
  std::chrono::milliseconds deadline{3000};  // per 64 units of a shard's part of a Put / Get, both paths together
  int retries = 2;                  // extra attempts on UNAVAILABLE / DEADLINE_EXCEEDED
  std::chrono::milliseconds backoff{40};
  // The pool a call's shard parts run on, the calling thread taking part (ThreadPool::ParallelFor,
  // so a call made from a task of that same pool completes however busy it is); it outlives the
  // client. Null: the parts run one after another on the calling thread.
  ThreadPool* io = nullptr;
  bool data_path = true;            // use shards' bulk data paths when advertised (false: gRPC only)
  // A shard's part of a Put / Get, while no other call to that shard is in flight, is split over up
  // to this many data-path connections in parallel (at least 32 units each; 1: never split).
  int max_stripes = 2;
  // Not empty: every unit a shard acknowledges is appended to this file before Put returns
  // (cache_client/ack_log.h; the chaos test's audit, docs/chaos.md).
  std::string ack_log{};
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

class AckLog;

class CacheClient {
 public:
  static StatusOr<std::unique_ptr<CacheClient>> Create(const CacheClientOptions& options);
  ~CacheClient();

  // Blocks until the answer: not from a gRPC callback thread (LookupPrefixAsync's answers come on
  // those few threads).
  PrefixHit LookupPrefix(const CacheNamespace& ns, const std::vector<int32_t>& tokens, int unit_tokens);
  // LookupPrefix without blocking: `done` runs once, on a gRPC thread (on the caller's when `cancel`
  // is cancelled already), with the answer LookupPrefix gives; it must not block, nor destroy the
  // client (which waits for the lookups still out before it goes). `cancel` (may be null) cancels
  // the shard calls and their retries: their units count as misses.
  void LookupPrefixAsync(const CacheNamespace& ns, std::vector<int32_t> tokens, int unit_tokens,
                         std::shared_ptr<CancelToken> cancel, std::function<void(PrefixHit)> done);
  PutResult Put(const CacheNamespace& ns, const std::vector<UnitPut>& units);
  // One entry per request, nullopt when missing or its shard is down.
  std::vector<std::optional<std::string>> Get(const CacheNamespace& ns, const std::vector<UnitGet>& units);
  StatusOr<uint64_t> DeleteNamespace(const CacheNamespace& ns);

  int shards() const;
  int OwnerOf(const UnitKey& placement) const;  // rendezvous

 private:
  struct Shard;
  struct Lookup;
  struct LookupCall;
  using Deadline = std::chrono::steady_clock::time_point;
  CacheClient() = default;
  // The deadline of a shard's part of a Put / Get of `units` units: the data path and gRPC after
  // it (with its retries) share it.
  Deadline CallDeadline(size_t units) const;
  // How many parallel parts a shard's part of `units` units goes in (CacheClientOptions::max_stripes).
  int StripesFor(const Shard& shard, size_t units) const;
  // A Put's or Get's units by owning shard (rendezvous on a tail's parent, else the unit's key), each
  // shard's cut into StripesFor parts: indexes into the call's units.
  struct Part {
    size_t shard = 0;
    std::vector<size_t> idx;
  };
  template <typename Unit>
  std::vector<Part> PartsOf(const std::vector<Unit>& units) const;
  // One shard's part of a Put / Get: `idx` indexes `units`; the data path first, then gRPC for
  // what it left unanswered.
  // The elements of `idx` acknowledged are appended to *acked.
  Status PutOnShard(Shard& shard, const CacheNamespace& ns, const std::vector<UnitPut>& units, std::vector<size_t> idx,
                    std::vector<size_t>* acked);
  void GetOnShard(Shard& shard, const CacheNamespace& ns, const std::vector<UnitGet>& units, std::vector<size_t> idx,
                  std::vector<std::optional<std::string>>* out);
  // Over the data path: returns the elements of `idx` it did not answer (all of them when the
  // shard has no usable data path), units too large for its frames among them.
  std::vector<size_t> DataPut(Shard& shard, const CacheNamespace& ns, const std::vector<UnitPut>& units,
                              const std::vector<size_t>& idx, Deadline deadline, std::vector<size_t>* acked,
                              Status* first_error);
  std::vector<size_t> DataGet(Shard& shard, const CacheNamespace& ns, const std::vector<UnitGet>& units,
                              const std::vector<size_t>& idx, Deadline deadline,
                              std::vector<std::optional<std::string>>* out);
  Status GrpcPut(Shard& shard, const CacheNamespace& ns, const std::vector<UnitPut>& units,
                 const std::vector<size_t>& idx, Deadline deadline, std::vector<size_t>* acked);
  void GrpcGet(Shard& shard, const CacheNamespace& ns, const std::vector<UnitGet>& units, const std::vector<size_t>& idx,
               Deadline deadline, std::vector<std::optional<std::string>>* out);

  // A lookup's shard call, again after a retryable failure (CacheClientOptions::retries, backoff);
  // its end is counted, and the last of the lookup's calls to end answers it.
  void IssueLookup(std::shared_ptr<LookupCall> call);
  void EndLookupCall(LookupCall& call, bool ok);
  static PrefixHit MergeLookup(const Lookup& lookup);

  std::vector<std::unique_ptr<Shard>> shards_;
  CacheClientOptions opt_;
  // fn(i) for each of n parts, on opt_.io when there is one.
  void ForEachPart(size_t n, const std::function<void(size_t)>& fn) const;

  std::unique_ptr<AckLog> ack_log_;  // null unless CacheClientOptions::ack_log
  // The lookups' shard calls alive (each a TaskGroup::Held); last, so destroyed first: it waits.
  TaskGroup lookups_{nullptr};
};

// A cache client for a comma-separated shard list (flags' form); nullptr (no cache) when it is empty.
// `ack_log`, `io`: CacheClientOptions::ack_log and ::io.
StatusOr<std::unique_ptr<CacheClient>> ConnectCache(const std::string& shard_list, const std::string& ack_log,
                                                    ThreadPool* io);

}  // namespace ds41
