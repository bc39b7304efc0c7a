#include "cache_service/store/unit_store.h"

#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

#include "unit/unit_format.h"

namespace ds41 {
namespace {

// Column families; the order is part of the on-disk format.
enum Cf { kDefault = 0, kUnits = 1, kIndex = 2, kLru = 3 };
const char* const kCfNames[] = {"default", "units", "index", "lru"};

// The one place where a RocksDB status becomes a ds41::Status.
Status FromRocks(const rocksdb::Status& s, const char* what) {
  if (s.ok()) return Status::Ok();
  const std::string msg = std::string("unit store: ") + what + ": " + s.ToString();
  if (s.IsNotFound()) return NotFoundError(msg);
  if (s.IsCorruption()) return DataLossError(msg);
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) return UnavailableError(msg);
  if (s.IsInvalidArgument()) return InvalidArgumentError(msg);
  return InternalError(msg);
}

std::string Join(const Key32& a, const Key32& b) {
  std::string k(64, '\0');
  std::memcpy(k.data(), a.data(), 32);
  std::memcpy(k.data() + 32, b.data(), 32);
  return k;
}

std::string LruKey(int64_t access_ms, std::string_view unit_key) {
  std::string k(8, '\0');
  const uint64_t v = static_cast<uint64_t>(access_ms);
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(v >> (56 - 8 * i));  // big-endian: byte order = time order
  k.append(unit_key);
  return k;
}

int64_t LruTime(std::string_view lru_key) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(lru_key[i]);
  return static_cast<int64_t>(v);
}

std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }
double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(Now() - t).count();
}

}  // namespace

struct UnitStore::Meta {
  uint32_t size = 0;
  uint32_t tokens = 0;
  int64_t write_ms = 0;
  int64_t access_ms = 0;
  bool has_parent = false;
  Key32 parent{};

  std::string Encode() const {
    std::string s(25 + (has_parent ? 32 : 0), '\0');
    std::memcpy(&s[0], &size, 4);
    std::memcpy(&s[4], &tokens, 4);
    std::memcpy(&s[8], &write_ms, 8);
    std::memcpy(&s[16], &access_ms, 8);
    s[24] = has_parent ? 1 : 0;
    if (has_parent) std::memcpy(&s[25], parent.data(), 32);
    return s;
  }
  static bool Decode(std::string_view s, Meta* m) {
    if (s.size() != 25 && s.size() != 57) return false;
    std::memcpy(&m->size, &s[0], 4);
    std::memcpy(&m->tokens, &s[4], 4);
    std::memcpy(&m->write_ms, &s[8], 8);
    std::memcpy(&m->access_ms, &s[16], 8);
    m->has_parent = s[24] != 0;
    if (m->has_parent != (s.size() == 57)) return false;
    if (m->has_parent) std::memcpy(m->parent.data(), &s[25], 32);
    return true;
  }
};

StatusOr<std::unique_ptr<UnitStore>> UnitStore::Open(const StoreOptions& options, StoreMetrics* metrics) {
  std::unique_ptr<UnitStore> st(new UnitStore());
  st->opt_ = options;
  st->metrics_ = metrics;
  st->clock_ = options.clock ? options.clock : SystemClock::Get();

  rocksdb::DBOptions dbo;
  dbo.create_if_missing = true;
  dbo.create_missing_column_families = true;
  dbo.max_background_jobs = 4;
  dbo.bytes_per_sync = 1 << 20;
  dbo.enable_pipelined_write = true;  // WAL and memtable writes of concurrent puts overlap

  rocksdb::ColumnFamilyOptions units;
  units.enable_blob_files = true;  // ~57 KB values: keep them out of the LSM (no rewrite on compaction)
  units.min_blob_size = 1024;
  units.blob_file_size = 256ull << 20;
  units.blob_compression_type = rocksdb::kNoCompression;  // FP4 codes do not compress
  units.compression = rocksdb::kNoCompression;
  units.enable_blob_garbage_collection = true;
  units.blob_garbage_collection_age_cutoff = 0.5;
  units.write_buffer_size = 128ull << 20;
  units.max_write_buffer_number = 4;

  rocksdb::ColumnFamilyOptions index;
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  index.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::ColumnFamilyOptions lru;

  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {kCfNames[kDefault], rocksdb::ColumnFamilyOptions()},
      {kCfNames[kUnits], units},
      {kCfNames[kIndex], index},
      {kCfNames[kLru], lru}};
  rocksdb::DB* db = nullptr;
  DS41_RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(dbo, options.path, cfs, &st->cf_, &db), "open"));
  st->db_.reset(db);

  // Recovery: the index is the truth; count what it holds.
  const auto t0 = Now();
  std::unique_ptr<rocksdb::Iterator> it(st->db_->NewIterator(rocksdb::ReadOptions(), st->cf_[kIndex]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key().size() != 64) continue;  // tail markers
    Meta m;
    if (!Meta::Decode(std::string_view(it->value().data(), it->value().size()), &m)) continue;
    st->units_ += 1;
    st->bytes_ += m.size;
  }
  DS41_RETURN_IF_ERROR(FromRocks(it->status(), "recovery scan"));
  if (metrics) {
    metrics->recovery_seconds.Set(Since(t0));
    metrics->recovered_units.Set(static_cast<double>(st->units_));
    metrics->units.Set(static_cast<double>(st->units_));
    metrics->bytes.Set(static_cast<double>(st->bytes_));
    metrics->capacity_bytes.Set(static_cast<double>(options.capacity_bytes));
  }
  return st;
}

UnitStore::~UnitStore() {
  if (db_) {
    FlushTouches().IgnoreError();
    for (auto* h : cf_) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db_->Close().PermitUncheckedError();
  }
}

size_t UnitStore::StripeIndex(std::string_view key) const { return static_cast<uint8_t>(key[63]) % stripes_.size(); }

std::mutex& UnitStore::StripeFor(std::string_view key) { return stripes_[StripeIndex(key)]; }

Status UnitStore::FlushTouches() {
  std::vector<std::pair<std::string, int64_t>> t;
  {
    std::lock_guard<std::mutex> l(touch_mu_);
    t.swap(touches_);
  }
  if (t.empty()) return Status::Ok();
  std::sort(t.begin(), t.end());  // by key, then read time: the last of a key is its newest read
  // Every stripe involved stays locked until the batch is written, so no Put or removal slips in
  // between reading a unit's meta and rewriting it. Taken in ascending order; this is the only place
  // that holds more than one.
  std::array<bool, std::tuple_size<decltype(stripes_)>::value> need{};
  for (const auto& [k, at] : t) need[StripeIndex(k)] = true;
  std::vector<std::unique_lock<std::mutex>> locks;
  for (size_t i = 0; i < need.size(); ++i)
    if (need[i]) locks.emplace_back(stripes_[i]);
  rocksdb::WriteBatch b;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i + 1 < t.size() && t[i + 1].first == t[i].first) continue;
    const auto& [k, at] = t[i];
    std::string raw;
    Meta m;
    if (!db_->Get(rocksdb::ReadOptions(), cf_[kIndex], k, &raw).ok() || !Meta::Decode(raw, &m)) continue;  // removed
    if (at - m.access_ms < 1000) continue;  // at most once a second per unit
    b.Delete(cf_[kLru], LruKey(m.access_ms, k));
    m.access_ms = at;
    b.Put(cf_[kLru], LruKey(at, k), "");
    b.Put(cf_[kIndex], k, m.Encode());
  }
  return b.Count() == 0 ? Status::Ok() : Commit(&b);
}

Status UnitStore::Commit(rocksdb::WriteBatch* batch) {
  rocksdb::WriteOptions wo;
  wo.sync = opt_.sync_writes;
  return FromRocks(db_->Write(wo, batch), "write");
}

Status UnitStore::Put(const Key32& ns, const Key32& key, const Key32* parent, uint32_t tokens, std::string_view unit) {
  const auto t0 = Now();
  const std::string k = Join(ns, key);
  const int64_t now = clock_->NowMs();
  {
    std::lock_guard<std::mutex> l(StripeFor(k));
    std::string old;
    Meta prev;
    const rocksdb::Status gs = db_->Get(rocksdb::ReadOptions(), cf_[kIndex], k, &old);
    const bool existed = gs.ok() && Meta::Decode(old, &prev);
    if (!gs.ok() && !gs.IsNotFound()) return FromRocks(gs, "read index");
    Meta m;
    m.size = static_cast<uint32_t>(unit.size());
    m.tokens = tokens;
    m.write_ms = now;
    m.access_ms = now;
    if (parent) {
      m.has_parent = true;
      m.parent = *parent;
    }
    rocksdb::WriteBatch b;
    b.Put(cf_[kUnits], k, rocksdb::Slice(unit.data(), unit.size()));
    b.Put(cf_[kIndex], k, m.Encode());
    if (existed) b.Delete(cf_[kLru], LruKey(prev.access_ms, k));
    b.Put(cf_[kLru], LruKey(now, k), "");
    if (parent) {
      uint32_t t = tokens;
      b.Put(cf_[kIndex], Join(ns, *parent) + std::string(reinterpret_cast<const char*>(key.data()), 32),
            rocksdb::Slice(reinterpret_cast<const char*>(&t), 4));
    }
    DS41_RETURN_IF_ERROR(Commit(&b));
    if (existed) {
      bytes_ += m.size;
      bytes_ -= prev.size;
    } else {
      units_ += 1;
      bytes_ += m.size;
    }
  }
  if (metrics_) {
    metrics_->write_seconds.Observe(Since(t0));
    metrics_->write_bytes.Increment(static_cast<double>(unit.size()));
    metrics_->units_written.Increment();
  }
  DS41_RETURN_IF_ERROR(EvictToCapacity());
  if (metrics_) {
    metrics_->units.Set(static_cast<double>(units_));
    metrics_->bytes.Set(static_cast<double>(bytes_));
  }
  return Status::Ok();
}

Status UnitStore::RemoveLocked(const std::string& k, const Meta& m, rocksdb::WriteBatch* b) {
  b->Delete(cf_[kUnits], k);
  b->Delete(cf_[kIndex], k);
  b->Delete(cf_[kLru], LruKey(m.access_ms, k));
  if (m.has_parent) b->Delete(cf_[kIndex], k.substr(0, 32) + std::string(reinterpret_cast<const char*>(m.parent.data()), 32) + k.substr(32));
  return Status::Ok();
}

StatusOr<std::optional<std::string>> UnitStore::Get(const Key32& ns, const Key32& key) {
  const auto t0 = Now();
  const std::string k = Join(ns, key);
  std::string value;
  // The unit carries its own CRC32C, checked below on every read (a bad unit is a counted miss and
  // is deleted), so RocksDB's second pass over the same bytes (a table-driven CRC in the distro's
  // portable build: ~10% of the service's CPU) is skipped for payload reads.
  rocksdb::ReadOptions ro;
  ro.verify_checksums = false;
  const rocksdb::Status s = db_->Get(ro, cf_[kUnits], k, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  DS41_RETURN_IF_ERROR(FromRocks(s, "read unit"));
  if (!VerifyUnitBytes(value).ok()) {
    std::lock_guard<std::mutex> l(StripeFor(k));
    std::string raw;
    Meta m;
    if (!db_->Get(rocksdb::ReadOptions(), cf_[kIndex], k, &raw).ok() || !Meta::Decode(raw, &m))
      return std::optional<std::string>();  // removed meanwhile
    rocksdb::WriteBatch b;
    DS41_RETURN_IF_ERROR(RemoveLocked(k, m, &b));
    DS41_RETURN_IF_ERROR(Commit(&b));
    units_ -= 1;
    bytes_ -= m.size;
    if (metrics_) {
      metrics_->checksum_failures.Increment();
      metrics_->evictions_checksum.Increment();
      metrics_->evicted_bytes.Increment(m.size);
      metrics_->units.Set(static_cast<double>(units_));
      metrics_->bytes.Set(static_cast<double>(bytes_));
    }
    return std::optional<std::string>();
  }
  bool flush;
  {
    constexpr size_t kTouchBatch = 64;
    const int64_t now = clock_->NowMs();
    std::lock_guard<std::mutex> l(touch_mu_);
    touches_.emplace_back(k, now);
    flush = touches_.size() >= kTouchBatch || now - touches_.front().second >= 1000;
  }
  if (flush) DS41_RETURN_IF_ERROR(FlushTouches());
  if (metrics_) {
    metrics_->read_seconds.Observe(Since(t0));
    metrics_->read_bytes.Increment(static_cast<double>(value.size()));
    metrics_->units_read.Increment();
  }
  return std::optional<std::string>(std::move(value));
}

StatusOr<std::vector<Presence>> UnitStore::Lookup(const Key32& ns, const std::vector<Key32>& keys) {
  std::vector<std::string> ks;
  ks.reserve(keys.size());
  for (const Key32& k : keys) ks.push_back(Join(ns, k));
  std::vector<rocksdb::Slice> slices(ks.begin(), ks.end());
  std::vector<rocksdb::ColumnFamilyHandle*> cfs(ks.size(), cf_[kIndex]);
  std::vector<std::string> values;
  std::vector<rocksdb::Status> st = db_->MultiGet(rocksdb::ReadOptions(), cfs, slices, &values);
  std::vector<Presence> out(keys.size());
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kIndex]));
  for (size_t i = 0; i < keys.size(); ++i) {
    Meta m;
    if (st[i].ok() && Meta::Decode(values[i], &m)) {
      out[i].present = true;
      out[i].tokens = m.tokens;
    } else if (!st[i].IsNotFound() && !st[i].ok()) {
      return FromRocks(st[i], "lookup");
    }
    // Tail markers sort right after the 64-byte key itself: ns|key|tail.
    for (it->Seek(ks[i]); it->Valid() && it->key().starts_with(ks[i]); it->Next()) {
      if (it->key().size() != 96 || it->value().size() != 4) continue;
      TailMarker t;
      std::memcpy(t.key.data(), it->key().data() + 64, 32);
      std::memcpy(&t.tokens, it->value().data(), 4);
      out[i].tails.push_back(t);
    }
  }
  return out;
}

StatusOr<uint64_t> UnitStore::EvictWhile(const std::function<bool(int64_t)>& pred, prometheus::Counter* reason) {
  DS41_RETURN_IF_ERROR(FlushTouches());  // recency of every read so far counts
  std::lock_guard<std::mutex> el(evict_mu_);
  uint64_t removed = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kLru]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string lk = it->key().ToString();
    if (lk.size() != 72) continue;
    if (!pred(LruTime(lk))) break;
    const std::string k = lk.substr(8);
    std::lock_guard<std::mutex> l(StripeFor(k));
    std::string raw;
    Meta m;
    rocksdb::WriteBatch b;
    if (!db_->Get(rocksdb::ReadOptions(), cf_[kIndex], k, &raw).ok() || !Meta::Decode(raw, &m) ||
        m.access_ms != LruTime(lk)) {
      b.Delete(cf_[kLru], lk);  // stale entry: the unit was touched or removed since
      DS41_RETURN_IF_ERROR(Commit(&b));
      continue;
    }
    DS41_RETURN_IF_ERROR(RemoveLocked(k, m, &b));
    DS41_RETURN_IF_ERROR(Commit(&b));
    units_ -= 1;
    bytes_ -= m.size;
    ++removed;
    if (metrics_) {
      reason->Increment();
      metrics_->evicted_bytes.Increment(m.size);
    }
  }
  DS41_RETURN_IF_ERROR(FromRocks(it->status(), "eviction scan"));
  if (metrics_) {
    metrics_->units.Set(static_cast<double>(units_));
    metrics_->bytes.Set(static_cast<double>(bytes_));
  }
  return removed;
}

Status UnitStore::EvictToCapacity() {
  if (bytes_ <= opt_.capacity_bytes) return Status::Ok();
  return EvictWhile([this](int64_t) { return bytes_ > opt_.capacity_bytes; },
                    metrics_ ? &metrics_->evictions_capacity : nullptr)
      .status();
}

StatusOr<uint64_t> UnitStore::EvictExpired() {
  if (opt_.ttl_seconds <= 0) return uint64_t{0};
  const int64_t cutoff = clock_->NowMs() - opt_.ttl_seconds * 1000;
  return EvictWhile([cutoff](int64_t access) { return access < cutoff; }, metrics_ ? &metrics_->evictions_ttl : nullptr);
}

StatusOr<uint64_t> UnitStore::DeleteNamespace(const Key32& ns) {
  std::lock_guard<std::mutex> el(evict_mu_);
  const std::string lo(reinterpret_cast<const char*>(ns.data()), 32);
  uint64_t removed = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kIndex]));
  for (it->Seek(lo); it->Valid() && it->key().starts_with(lo); it->Next()) {
    const std::string k = it->key().ToString();
    if (k.size() != 64) continue;
    Meta m;
    if (!Meta::Decode(std::string_view(it->value().data(), it->value().size()), &m)) continue;
    std::lock_guard<std::mutex> l(StripeFor(k));
    rocksdb::WriteBatch b;
    DS41_RETURN_IF_ERROR(RemoveLocked(k, m, &b));
    DS41_RETURN_IF_ERROR(Commit(&b));
    units_ -= 1;
    bytes_ -= m.size;
    ++removed;
    if (metrics_) {
      metrics_->evictions_namespace.Increment();
      metrics_->evicted_bytes.Increment(m.size);
    }
  }
  DS41_RETURN_IF_ERROR(FromRocks(it->status(), "namespace scan"));
  if (metrics_) {
    metrics_->units.Set(static_cast<double>(units_));
    metrics_->bytes.Set(static_cast<double>(bytes_));
  }
  return removed;
}

Status UnitStore::Compact() {
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
  cro.blob_garbage_collection_policy = rocksdb::BlobGarbageCollectionPolicy::kForce;
  cro.blob_garbage_collection_age_cutoff = 1.0;
  for (int c = kUnits; c <= kLru; ++c) DS41_RETURN_IF_ERROR(FromRocks(db_->CompactRange(cro, cf_[c], nullptr, nullptr), "compact"));
  return Status::Ok();
}

StoreStats UnitStore::stats() const { return {units_.load(), bytes_.load(), opt_.capacity_bytes}; }

}  // namespace ds41
