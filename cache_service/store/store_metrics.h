// StoreMetrics: what the unit store reports (SERVING.md §7, ANCHORS.md §16 "Prefix store"). The
// store updates these; the service exposes them through prometheus-cpp. Thread-safe (atomics).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace ds41 {

struct StoreMetrics {
  explicit StoreMetrics(prometheus::Registry& registry);

  prometheus::Family<prometheus::Counter>& lookups;  // result: hit | partial | miss | below_unit
  prometheus::Counter& lookups_hit;
  prometheus::Counter& lookups_partial;
  prometheus::Counter& lookups_miss;
  prometheus::Counter& lookups_below_unit;
  prometheus::Counter& hit_tokens;
  prometheus::Counter& queried_tokens;
  prometheus::Gauge& bytes;
  prometheus::Gauge& units;
  prometheus::Gauge& capacity_bytes;
  prometheus::Family<prometheus::Counter>& evictions;  // reason: ttl | capacity | checksum | namespace
  prometheus::Counter& evictions_ttl;
  prometheus::Counter& evictions_capacity;
  prometheus::Counter& evictions_checksum;
  prometheus::Counter& evictions_namespace;
  prometheus::Counter& evicted_bytes;
  prometheus::Counter& checksum_failures;
  prometheus::Counter& read_bytes;
  prometheus::Counter& write_bytes;
  prometheus::Counter& units_written;
  prometheus::Counter& units_read;
  prometheus::Histogram& read_seconds;
  prometheus::Histogram& write_seconds;
  prometheus::Gauge& recovery_seconds;
  prometheus::Gauge& recovered_units;
  prometheus::Gauge& segment_files;
  prometheus::Gauge& segment_bytes;   // on disk; minus `bytes`, what compaction can reclaim
  prometheus::Gauge& segment_peak_bytes;  // the most segment_bytes has been since the shard opened
  prometheus::Counter& compacted_bytes;
  // Grouped payload writes (SegmentFiles): bytes and device time per write, so the batching shows.
  prometheus::Histogram& segment_write_bytes;
  prometheus::Histogram& segment_write_seconds;
  prometheus::Gauge& io_buffer_bytes;  // the segments' O_DIRECT staging and read buffers
  prometheus::Gauge& index_memory_bytes;         // RocksDB memtables, all families
  prometheus::Gauge& index_memory_budget_bytes;  // StoreOptions::index_memory_bytes
  prometheus::Gauge& index_cache_bytes;          // RocksDB's block cache in use
  prometheus::Gauge& index_cache_budget_bytes;   // StoreOptions::index_cache_bytes
  prometheus::Gauge& table_reader_bytes;         // RocksDB's open tables outside the block cache
  // The RAM read cache (read_cache.h): reads it served or not, its bytes, budget and evictions.
  prometheus::Family<prometheus::Counter>& read_cache_lookups;  // result: hit | miss
  prometheus::Counter& read_cache_hits;
  prometheus::Counter& read_cache_misses;
  prometheus::Gauge& read_cache_bytes;
  prometheus::Gauge& read_cache_budget_bytes;
  prometheus::Counter& read_cache_evictions;
};

}  // namespace ds41
