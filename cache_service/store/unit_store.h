// UnitStore: cache units on local SSD: payloads in append-only segment files, everything else in
// RocksDB (the only file that includes <rocksdb/...>).
//
// Payloads (~57 KB) are written once to a segment file (cache_service/store/segment_files.h) and
// only their location is indexed: a put costs one payload write plus a small WAL record.
// RocksDB column families, in this order (never reorder):
//   units  (unused: store format 1 kept payloads here; a store of that format is refused at Open)
//   index  ns|key        -> UnitMeta          size, tokens, times, segment location; what Lookup reads
//          ns|parent|key -> tail tokens       tail markers: which tails follow a unit (or the root)
//   lru    be64(access)|ns|key -> ""          access order for TTL and capacity eviction
// A put appends the payload, then commits the index (WAL on, optional fsync of both): an
// acknowledged unit survives kill -9, and an index entry never points at bytes not yet written.
// A get reads the index, then the unit from the RAM read cache (units read again: read_cache.h) or
// from its segment file, whose bytes' CRC is checked on every such read.
//
// Thread-safe: all methods may be called concurrently. A unit's index entries are read and rewritten
// under its key's stripe lock (stripes_; several are taken in ascending order, LockStripes);
// evict_mu_ serializes eviction passes and namespace deletes, compact_mu_ segment compactions, each
// taken before any stripe; touch_mu_ guards the pending LRU refreshes (never held with a stripe);
// the unit and byte counts are atomics, and the rest is fixed after Open.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache_service/store/read_cache.h"
#include "cache_service/store/segment_files.h"
#include "cache_service/store/store_metrics.h"
#include "util/clock.h"
#include "util/status.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace rocksdb {
class Cache;
class DB;
class ColumnFamilyHandle;
class WriteBatch;
}  // namespace rocksdb

namespace ds41 {

using Key32 = std::array<uint8_t, 32>;

struct StoreOptions {
  std::string path;
  uint64_t capacity_bytes = uint64_t{64} << 30;  // LRU eviction beyond this
  int64_t ttl_seconds = 72 * 3600;               // since last access; <= 0: never expire
  // A read moves its unit in the LRU order (an index write) only when the access recorded for it is
  // at least this old, as memcached bumps an item at most once a minute: the units every request
  // reads (a shared system prompt's) cost no index write per read, and the order (and the TTL's
  // "last access") is exact to this interval.
  int64_t lru_refresh_ms = 60'000;
  bool sync_writes = false;  // WAL is always on; sync also survives power loss (kill -9 needs only the WAL)
  uint64_t segment_bytes = uint64_t{256} << 20;  // payload segment file size
  bool direct_io = true;  // payloads written (and read) with O_DIRECT where the file system allows it
  // RAM for units read again (read_cache.h); 0: none (with direct_io false the page cache keeps
  // them already).
  uint64_t read_cache_bytes = uint64_t{1} << 30;
  // RAM for RocksDB's memtables over all column families (the index and LRU order are what is
  // written); a flush starts past it, and the write-ahead logs are kept to twice it. RocksDB's own
  // defaults (64 MiB per family, two each) sit outside any budget and let the logs grow between
  // flushes.
  uint64_t index_memory_bytes = uint64_t{64} << 20;
  // RAM for the blocks RocksDB reads from its tables (the index's data, index and filter blocks): one
  // LRU cache for every column family. Left alone, RocksDB gives each table factory an 8 MiB cache of
  // its own and keeps every table's index and filter blocks outside any cache, so its memory grows
  // with the tables.
  uint64_t index_cache_bytes = uint64_t{64} << 20;
  const Clock* clock = nullptr;                  // default: system clock
  // Called (from a put, cheaply: it should only wake a thread that calls EvictExpired) whenever the
  // segment files pass the capacity by more than four segments: capacity eviction leaves dead bytes
  // faster than a periodic sweep reclaims them under a write burst, and the disk must stay bounded
  // by configuration, not by the sweep's timer.
  std::function<void()> files_over_bound;
};

struct TailMarker {
  Key32 key{};
  uint32_t tokens = 0;
};

struct Presence {
  bool present = false;
  uint32_t tokens = 0;              // of the unit, when present
  std::vector<TailMarker> tails;    // tails stored after this key (also for absent keys such as the root)
};

struct StoreStats {
  uint64_t units = 0, bytes = 0, capacity = 0;
};

class UnitStore {
 public:
  // Opens (creating if missing) and recovers: counts units and bytes from the index.
  static StatusOr<std::unique_ptr<UnitStore>> Open(const StoreOptions& options, StoreMetrics* metrics);
  ~UnitStore();

  // Stores `unit` (already validated) under ns|key; `parent` set for a tail unit. Returns once the
  // write is in the WAL (and fsynced when sync_writes). May evict least recently used units.
  Status Put(const Key32& ns, const Key32& key, const Key32* parent, uint32_t tokens, std::string_view unit);

  struct PutItem {
    Key32 ns{}, key{};
    const Key32* parent = nullptr;  // set for a tail unit
    uint32_t tokens = 0;
    std::string_view unit;
  };
  // Put for several units at once: their payloads share segment writes and their index entries one
  // RocksDB write. One status per unit, in order.
  std::vector<Status> PutMany(const std::vector<PutItem>& items);
  bool DirectIo() const;  // payloads are being written with O_DIRECT (not only asked for)

  // The unit's bytes, or nullopt when absent. A unit whose checksum fails is deleted, counted and
  // reported as absent: it is never served.
  StatusOr<std::optional<std::string>> Get(const Key32& ns, const Key32& key);
  // Get for each key, in order: one index read for all, and the units that lie close together in
  // the payload segments (a chain put together) in one device read.
  std::vector<StatusOr<std::optional<std::string>>> GetMany(const Key32& ns, const std::vector<Key32>& keys);

  // Presence of each key and the tails that follow it, from the index only (no payload reads).
  StatusOr<std::vector<Presence>> Lookup(const Key32& ns, const std::vector<Key32>& keys);

  // Removes every unit of a namespace; returns how many.
  StatusOr<uint64_t> DeleteNamespace(const Key32& ns);

  // Removes units idle for longer than the TTL (returns how many), then compacts the payload
  // segments that are more than half dead (more than a tenth once the segment files exceed the
  // capacity). Called periodically.
  StatusOr<uint64_t> EvictExpired();

  // Forces compaction of the index and of every segment holding dead bytes: on-disk bytes then
  // reflect live units.
  Status Compact();

  StoreStats stats() const;

 private:
  struct Meta;
  UnitStore() = default;
  Status Commit(rocksdb::WriteBatch* batch);
  // The unit's index entry; nullopt when it is absent or cannot be read.
  std::optional<Meta> IndexedMeta(const std::string& index_key) const;
  // Removes the unit (index, LRU entry, tail marker; its payload bytes become dead) and counts it.
  // REQUIRES: the key's stripe lock.
  Status RemoveLocked(const std::string& index_key, const Meta& meta);
  // No index entry points at `loc` any more (removed or replaced): its segment bytes are dead and
  // its read-cache entry goes.
  void ReleasePayload(const SegmentLocation& loc);
  void RemoveFromIndex(const std::string& index_key, const Meta& meta, rocksdb::WriteBatch* batch);
  // Copies the live units of segments whose live fraction is below `max_live_fraction` into the
  // active segment, one segment after another, so those files go (the disk holds at most one
  // segment's live bytes more meanwhile).
  Status CompactSegments(double max_live_fraction);
  // Copies units[begin, end) (index key, entry as scanned) to the active segment and repoints the
  // entries still pointing where they were scanned (the rest were removed or rewritten meanwhile).
  Status MoveUnits(const std::vector<std::pair<std::string, Meta>>& units, size_t begin, size_t end);
  void PublishSizes();
  Status EvictToCapacity();
  StatusOr<uint64_t> EvictWhile(const std::function<bool(int64_t access_ms)>& pred, prometheus::Counter* reason);
  std::mutex& StripeFor(std::string_view key);
  size_t StripeIndex(std::string_view key) const;
  // The stripes of all `keys`, locked in ascending order (the one order for holding several).
  std::vector<std::unique_lock<std::mutex>> LockStripes(const std::vector<std::string_view>& keys);
  // Writes the LRU refreshes of reads so far, one batch for all of them.
  Status FlushTouches() DS41_EXCLUDES(touch_mu_);
  // Whether a read at `now_ms` moves the unit in the LRU order (opt_.lru_refresh_ms).
  bool RefreshDue(const Meta& meta, int64_t now_ms) const;

  StoreOptions opt_;
  StoreMetrics* metrics_ = nullptr;
  const Clock* clock_ = nullptr;
  std::unique_ptr<SegmentFiles> segments_;
  std::unique_ptr<ReadCache> read_cache_;
  std::shared_ptr<rocksdb::Cache> block_cache_;  // StoreOptions::index_cache_bytes; outlives db_
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> cf_;  // default, units, index, lru
  // (std::mutex, not Mutex: LockStripes holds a set chosen at run time, which the analysis cannot
  // name; nothing is DS41_GUARDED_BY a stripe.)
  std::array<std::mutex, 64> stripes_;
  Mutex evict_mu_;    // one eviction pass or namespace delete at a time; before any stripe
  Mutex compact_mu_;  // one segment compaction at a time; before any stripe
  // Reads refresh a unit's LRU position lazily: (index key, read time) pairs written in batches (by
  // the read that fills one, a read a second after the oldest, and before every eviction pass)
  // rather than one WAL write per read. A crash loses only recency.
  Mutex touch_mu_;
  std::vector<std::pair<std::string, int64_t>> touches_ DS41_GUARDED_BY(touch_mu_);
  std::atomic<uint64_t> units_{0}, bytes_{0};
};

}  // namespace ds41
