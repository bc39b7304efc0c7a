#include "cache_service/store/store_metrics.h"

namespace ds41 {
namespace {

// 64 KiB (one unit) .. 16 MiB, doubling.
prometheus::Histogram::BucketBoundaries BatchBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 64 * 1024; v <= 16 * 1024 * 1024; v *= 2.0) b.push_back(v);
  return b;
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  // 10 us .. ~10 s, log-spaced.
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 1e-5; v < 12.0; v *= 2.0) b.push_back(v);
  return b;
}

}  // namespace

StoreMetrics::StoreMetrics(prometheus::Registry& r)
    : lookups(prometheus::BuildCounter().Name("ds41_store_lookups_total").Help("Lookups by result").Register(r)),
      lookups_hit(lookups.Add({{"result", "hit"}})),
      lookups_partial(lookups.Add({{"result", "partial"}})),
      lookups_miss(lookups.Add({{"result", "miss"}})),
      lookups_below_unit(lookups.Add({{"result", "below_unit"}})),
      hit_tokens(prometheus::BuildCounter().Name("ds41_store_hit_tokens_total").Help("Tokens found cached by lookups").Register(r).Add({})),
      queried_tokens(prometheus::BuildCounter().Name("ds41_store_queried_tokens_total").Help("Tokens asked for by lookups").Register(r).Add({})),
      bytes(prometheus::BuildGauge().Name("ds41_store_bytes").Help("Bytes of units held").Register(r).Add({})),
      units(prometheus::BuildGauge().Name("ds41_store_units").Help("Units held").Register(r).Add({})),
      capacity_bytes(prometheus::BuildGauge().Name("ds41_store_capacity_bytes").Help("Configured capacity").Register(r).Add({})),
      evictions(prometheus::BuildCounter().Name("ds41_store_evictions_total").Help("Units removed, by reason").Register(r)),
      evictions_ttl(evictions.Add({{"reason", "ttl"}})),
      evictions_capacity(evictions.Add({{"reason", "capacity"}})),
      evictions_checksum(evictions.Add({{"reason", "checksum"}})),
      evictions_namespace(evictions.Add({{"reason", "namespace"}})),
      evicted_bytes(prometheus::BuildCounter().Name("ds41_store_evicted_bytes_total").Help("Bytes of units removed").Register(r).Add({})),
      checksum_failures(prometheus::BuildCounter().Name("ds41_store_checksum_failures_total").Help("Units whose checksum failed on read").Register(r).Add({})),
      read_bytes(prometheus::BuildCounter().Name("ds41_store_read_bytes_total").Help("Unit bytes served").Register(r).Add({})),
      write_bytes(prometheus::BuildCounter().Name("ds41_store_write_bytes_total").Help("Unit bytes written").Register(r).Add({})),
      units_written(prometheus::BuildCounter().Name("ds41_store_units_written_total").Help("Units written").Register(r).Add({})),
      units_read(prometheus::BuildCounter().Name("ds41_store_units_read_total").Help("Units served").Register(r).Add({})),
      read_seconds(prometheus::BuildHistogram().Name("ds41_store_read_seconds").Help("Time to read one unit").Register(r).Add({}, LatencyBuckets())),
      write_seconds(prometheus::BuildHistogram().Name("ds41_store_write_seconds").Help("Time to write one unit").Register(r).Add({}, LatencyBuckets())),
      recovery_seconds(prometheus::BuildGauge().Name("ds41_store_recovery_seconds").Help("Time the last open spent recovering").Register(r).Add({})),
      recovered_units(prometheus::BuildGauge().Name("ds41_store_recovered_units").Help("Units found at the last open").Register(r).Add({})),
      segment_files(prometheus::BuildGauge().Name("ds41_store_segment_files").Help("Payload segment files on disk").Register(r).Add({})),
      segment_bytes(prometheus::BuildGauge().Name("ds41_store_segment_bytes").Help("Bytes of payload segment files, dead bytes included").Register(r).Add({})),
      segment_peak_bytes(prometheus::BuildGauge().Name("ds41_store_segment_peak_bytes").Help("The most bytes the payload segment files have held at once since the shard opened (compaction's copies included): the disk room it needs").Register(r).Add({})),
      compacted_bytes(prometheus::BuildCounter().Name("ds41_store_compacted_bytes_total").Help("Live unit bytes copied out of mostly dead segments").Register(r).Add({})),
      segment_write_bytes(prometheus::BuildHistogram().Name("ds41_store_segment_write_bytes").Help("Bytes per payload write (O_DIRECT: concurrent puts grouped into one; buffered: one unit)").Register(r).Add({}, BatchBuckets())),
      segment_write_seconds(prometheus::BuildHistogram().Name("ds41_store_segment_write_seconds").Help("Time of one payload write (O_DIRECT: its sync included)").Register(r).Add({}, LatencyBuckets())),
      io_buffer_bytes(prometheus::BuildGauge().Name("ds41_store_io_buffer_bytes").Help("Memory held by the payload segments' O_DIRECT staging and read buffers (pooled, kept for reuse)").Register(r).Add({})),
      index_memory_bytes(prometheus::BuildGauge().Name("ds41_store_index_memory_bytes").Help("Memory held by RocksDB's memtables (the index and LRU order), all column families").Register(r).Add({})),
      index_memory_budget_bytes(prometheus::BuildGauge().Name("ds41_store_index_memory_budget_bytes").Help("Memtable budget (--index-memory); a flush starts past it").Register(r).Add({})),
      index_cache_bytes(prometheus::BuildGauge().Name("ds41_store_index_cache_bytes").Help("Memory held by RocksDB's block cache (the index's data, index and filter blocks read from its tables)").Register(r).Add({})),
      index_cache_budget_bytes(prometheus::BuildGauge().Name("ds41_store_index_cache_budget_bytes").Help("Block cache size (--index-cache)").Register(r).Add({})),
      table_reader_bytes(prometheus::BuildGauge().Name("ds41_store_table_reader_bytes").Help("Memory RocksDB's open tables hold outside the block cache").Register(r).Add({})),
      read_cache_lookups(prometheus::BuildCounter().Name("ds41_store_read_cache_lookups_total").Help("Unit reads by whether the RAM read cache held the unit").Register(r)),
      read_cache_hits(read_cache_lookups.Add({{"result", "hit"}})),
      read_cache_misses(read_cache_lookups.Add({{"result", "miss"}})),
      read_cache_bytes(prometheus::BuildGauge().Name("ds41_store_read_cache_bytes").Help("Unit bytes held by the RAM read cache").Register(r).Add({})),
      read_cache_budget_bytes(prometheus::BuildGauge().Name("ds41_store_read_cache_budget_bytes").Help("Configured RAM read cache size").Register(r).Add({})),
      read_cache_evictions(prometheus::BuildCounter().Name("ds41_store_read_cache_evictions_total").Help("Units dropped from the RAM read cache for room").Register(r).Add({})) {}

}  // namespace ds41
