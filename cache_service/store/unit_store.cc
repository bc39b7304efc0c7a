#include "cache_service/store/unit_store.h"

#include <rocksdb/cache.h>
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
#include <map>
#include <tuple>
#include <utility>

#include "unit/reply_record.h"
#include "unit/unit_format.h"
#include "unit/unit_key.h"
#include "util/mutex.h"

namespace ds41 {
namespace {

// Column families; the order is part of the on-disk format.
enum Cf { kDefault = 0, kUnits = 1, kIndex = 2, kLru = 3 };
const char* const kCfNames[] = {"default", "units", "index", "lru"};

// Compaction: the live bytes of the victims one index scan collects (in segments' worth: their
// entries are held meanwhile), and the units moved by one read, one append and one index write.
constexpr uint64_t kCompactGroupSegments = 16;
constexpr size_t kCompactBatchUnits = 64;

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

// The index entries of `keys` under `ns` in one MultiGet: their index keys into *index_keys, the
// entries into *values, one status each.
std::vector<rocksdb::Status> ReadIndex(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* index, const Key32& ns,
                                       const std::vector<Key32>& keys, std::vector<std::string>* index_keys,
                                       std::vector<std::string>* values) {
  index_keys->clear();
  index_keys->reserve(keys.size());
  for (const Key32& k : keys) index_keys->push_back(Join(ns, k));
  const std::vector<rocksdb::Slice> slices(index_keys->begin(), index_keys->end());
  const std::vector<rocksdb::ColumnFamilyHandle*> cfs(keys.size(), index);
  return db.MultiGet(rocksdb::ReadOptions(), cfs, slices, values);
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
  SegmentLocation loc;  // where the payload lies (loc.size == size)

  // Store format 2: 37 bytes, 69 with a parent. (Format 1's 25/57-byte entries had no location.)
  static constexpr size_t kBase = 37;
  std::string Encode() const {
    std::string s(kBase + (has_parent ? 32 : 0), '\0');
    std::memcpy(&s[0], &size, 4);
    std::memcpy(&s[4], &tokens, 4);
    std::memcpy(&s[8], &write_ms, 8);
    std::memcpy(&s[16], &access_ms, 8);
    s[24] = has_parent ? 1 : 0;
    std::memcpy(&s[25], &loc.segment, 4);
    std::memcpy(&s[29], &loc.offset, 8);
    if (has_parent) std::memcpy(&s[kBase], parent.data(), 32);
    return s;
  }
  static bool Decode(std::string_view s, Meta* m) {
    if (s.size() != kBase && s.size() != kBase + 32) return false;
    std::memcpy(&m->size, &s[0], 4);
    std::memcpy(&m->tokens, &s[4], 4);
    std::memcpy(&m->write_ms, &s[8], 8);
    std::memcpy(&m->access_ms, &s[16], 8);
    m->has_parent = s[24] != 0;
    if (m->has_parent != (s.size() == kBase + 32)) return false;
    std::memcpy(&m->loc.segment, &s[25], 4);
    std::memcpy(&m->loc.offset, &s[29], 8);
    m->loc.size = m->size;
    if (m->has_parent) std::memcpy(m->parent.data(), &s[kBase], 32);
    return true;
  }
  static bool IsFormat1(std::string_view s) { return s.size() == 25 || s.size() == 57; }
  bool At(const SegmentLocation& l) const { return loc.segment == l.segment && loc.offset == l.offset; }
};

std::optional<UnitStore::Meta> UnitStore::IndexedMeta(const std::string& k) const {
  std::string raw;
  Meta m;
  if (!db_->Get(rocksdb::ReadOptions(), cf_[kIndex], k, &raw).ok() || !Meta::Decode(raw, &m)) return std::nullopt;
  return m;
}

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
  dbo.wal_bytes_per_sync = 1 << 20;  // write-back as it goes, not in one burst at the next sync
  dbo.enable_pipelined_write = true;  // WAL and memtable writes of concurrent puts overlap

  // One memtable budget for the whole database, and logs bounded to twice it: a log is kept until
  // every family it holds writes for has flushed, so without the cap the rarely written families
  // would pin them.
  const uint64_t memtables = std::max<uint64_t>(options.index_memory_bytes, uint64_t{4} << 20);
  dbo.db_write_buffer_size = memtables;
  dbo.max_total_wal_size = 2 * memtables;
  // One block cache for every family, charged with the tables' index and filter blocks too, so that
  // what RocksDB reads stays within --index-cache however many tables there are.
  st->block_cache_ = rocksdb::NewLRUCache(std::max<uint64_t>(options.index_cache_bytes, uint64_t{1} << 20));
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = st->block_cache_;
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  rocksdb::ColumnFamilyOptions written;  // index and LRU order: nearly every write
  written.write_buffer_size = memtables / 4;
  written.max_write_buffer_number = 2;
  written.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::ColumnFamilyOptions idle = written;  // default and the legacy payload family: none
  idle.write_buffer_size = 1 << 20;
  rocksdb::ColumnFamilyOptions index = written;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  index.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  std::vector<rocksdb::ColumnFamilyDescriptor> cfs = {
      {kCfNames[kDefault], idle}, {kCfNames[kUnits], idle}, {kCfNames[kIndex], index}, {kCfNames[kLru], written}};
  rocksdb::DB* db = nullptr;
  DS41_RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(dbo, options.path, cfs, &st->cf_, &db), "open"));
  st->db_.reset(db);
  SegmentFiles::WriteObserver on_write;
  if (metrics != nullptr)
    on_write = [metrics](uint64_t bytes, double seconds) {
      metrics->segment_write_bytes.Observe(static_cast<double>(bytes));
      metrics->segment_write_seconds.Observe(seconds);
    };
  auto segments = SegmentFiles::Open(options.path + "/segments", options.segment_bytes, options.direct_io, std::move(on_write));
  DS41_RETURN_IF_ERROR(segments.status());
  st->segments_ = std::move(segments).value();
  st->read_cache_ = std::make_unique<ReadCache>(options.read_cache_bytes, metrics);

  // Recovery: the index is the truth; count what it holds and which segment bytes are live. An
  // entry whose payload is missing (its file lost outside the store's control) is dropped.
  const auto t0 = Now();
  std::vector<std::pair<std::string, Meta>> lost;
  std::unique_ptr<rocksdb::Iterator> it(st->db_->NewIterator(rocksdb::ReadOptions(), st->cf_[kIndex]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key().size() != 64) continue;  // tail markers
    const std::string_view v(it->value().data(), it->value().size());
    if (Meta::IsFormat1(v))
      return FailedPreconditionError("unit store: " + options.path +
                                     " was written by an older ds41 (payloads inside RocksDB); this version keeps them "
                                     "in segment files: remove the directory to start an empty cache");
    Meta m;
    if (!Meta::Decode(v, &m)) continue;
    if (!st->segments_->Recount(m.loc)) {
      lost.emplace_back(it->key().ToString(), m);
      continue;
    }
    st->units_ += 1;
    st->bytes_ += m.size;
  }
  DS41_RETURN_IF_ERROR(FromRocks(it->status(), "recovery scan"));
  it.reset();
  for (const auto& [k, m] : lost) {
    rocksdb::WriteBatch b;
    st->RemoveFromIndex(k, m, &b);
    DS41_RETURN_IF_ERROR(st->Commit(&b));
  }
  DS41_RETURN_IF_ERROR(st->segments_->DropUnreferenced());  // appended, never indexed (a crash in between)
  if (metrics) {
    metrics->recovery_seconds.Set(Since(t0));
    metrics->recovered_units.Set(static_cast<double>(st->units_));
    metrics->capacity_bytes.Set(static_cast<double>(options.capacity_bytes));
    metrics->index_memory_budget_bytes.Set(static_cast<double>(memtables));
    metrics->index_cache_budget_bytes.Set(static_cast<double>(st->block_cache_->GetCapacity()));
  }
  st->PublishSizes();
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

std::vector<std::unique_lock<std::mutex>> UnitStore::LockStripes(const std::vector<std::string_view>& keys) {
  std::array<bool, std::tuple_size<decltype(stripes_)>::value> need{};
  for (std::string_view k : keys) need[StripeIndex(k)] = true;
  std::vector<std::unique_lock<std::mutex>> locks;
  for (size_t i = 0; i < need.size(); ++i)
    if (need[i]) locks.emplace_back(stripes_[i]);
  return locks;
}

Status UnitStore::FlushTouches() {
  std::vector<std::pair<std::string, int64_t>> t;
  {
    MutexLock l(&touch_mu_);
    t.swap(touches_);
  }
  if (t.empty()) return Status::Ok();
  std::sort(t.begin(), t.end());  // by key, then read time: the last of a key is its newest read
  // Every stripe involved stays locked until the batch is written, so no Put or removal slips in
  // between reading a unit's meta and rewriting it.
  std::vector<std::string_view> keys;
  for (const auto& [k, at] : t) keys.push_back(k);
  const auto locks = LockStripes(keys);
  rocksdb::WriteBatch b;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i + 1 < t.size() && t[i + 1].first == t[i].first) continue;
    const auto& [k, at] = t[i];
    std::optional<Meta> indexed = IndexedMeta(k);
    if (!indexed) continue;  // removed
    Meta& m = *indexed;
    if (!RefreshDue(m, at)) continue;  // refreshed meanwhile
    b.Delete(cf_[kLru], LruKey(m.access_ms, k));
    m.access_ms = at;
    b.Put(cf_[kLru], LruKey(at, k), "");
    b.Put(cf_[kIndex], k, m.Encode());
  }
  return b.Count() == 0 ? Status::Ok() : Commit(&b);
}

bool UnitStore::RefreshDue(const Meta& meta, int64_t now_ms) const {
  return now_ms - meta.access_ms >= opt_.lru_refresh_ms;
}

Status UnitStore::Commit(rocksdb::WriteBatch* batch) {
  rocksdb::WriteOptions wo;
  wo.sync = opt_.sync_writes;
  return FromRocks(db_->Write(wo, batch), "write");
}

Status UnitStore::Put(const Key32& ns, const Key32& key, const Key32* parent, uint32_t tokens, std::string_view unit) {
  return std::move(PutMany({{ns, key, parent, tokens, unit}}).front());
}

std::vector<Status> UnitStore::PutMany(const std::vector<PutItem>& items) {
  const auto t0 = Now();
  const int64_t now = clock_->NowMs();
  const size_t n = items.size();
  std::vector<std::string> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = Join(items[i].ns, items[i].key);
  const std::vector<std::string_view> key_views(keys.begin(), keys.end());
  {
    // A key twice in one call: the later must replace the earlier, so they go one at a time.
    std::vector<std::string_view> sorted = key_views;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      std::vector<Status> out;
      for (const PutItem& item : items) out.push_back(std::move(PutMany({item}).front()));
      return out;
    }
  }
  // The payloads first (outside the stripe locks: puts write in parallel), then the index entries
  // that point at them.
  std::vector<std::string_view> payloads(n);
  for (size_t i = 0; i < n; ++i) payloads[i] = items[i].unit;
  std::vector<StatusOr<SegmentLocation>> locs = segments_->AppendMany(payloads, opt_.sync_writes);
  std::vector<Status> out(n);
  size_t stored = 0;
  uint64_t stored_bytes = 0;
  {
    const auto locks = LockStripes(key_views);
    rocksdb::WriteBatch b;
    std::vector<size_t> in_batch;
    std::vector<std::optional<Meta>> replaced(n);
    for (size_t i = 0; i < n; ++i) {
      if (!locs[i].ok()) {
        out[i] = locs[i].status();
        continue;
      }
      const PutItem& item = items[i];
      const std::string& k = keys[i];
      std::string old;
      const rocksdb::Status gs = db_->Get(rocksdb::ReadOptions(), cf_[kIndex], k, &old);
      if (!gs.ok() && !gs.IsNotFound()) {
        segments_->Abandon(*locs[i]);
        out[i] = FromRocks(gs, "read index");
        continue;
      }
      Meta prev;
      if (gs.ok() && Meta::Decode(old, &prev)) replaced[i] = prev;
      Meta m;
      m.size = static_cast<uint32_t>(item.unit.size());
      m.tokens = item.tokens;
      m.write_ms = now;
      m.access_ms = now;
      m.loc = *locs[i];
      if (item.parent) {
        m.has_parent = true;
        m.parent = *item.parent;
      }
      b.Put(cf_[kIndex], k, m.Encode());
      if (replaced[i]) b.Delete(cf_[kLru], LruKey(replaced[i]->access_ms, k));
      b.Put(cf_[kLru], LruKey(now, k), "");
      if (item.parent) {
        uint32_t t = item.tokens;
        b.Put(cf_[kIndex], Join(item.ns, *item.parent) + KeyString(item.key),
              rocksdb::Slice(reinterpret_cast<const char*>(&t), 4));
      }
      in_batch.push_back(i);
    }
    const Status c = in_batch.empty() ? Status::Ok() : Commit(&b);
    for (size_t i : in_batch) {
      if (!c.ok()) {
        segments_->Abandon(*locs[i]);
        out[i] = c;
        continue;
      }
      segments_->Commit(*locs[i]);
      const uint32_t size = static_cast<uint32_t>(items[i].unit.size());
      bytes_ += size;  // (before the replaced unit's bytes go: the count never dips below what is held)
      if (replaced[i]) {
        ReleasePayload(replaced[i]->loc);
        bytes_ -= replaced[i]->size;
      } else {
        units_ += 1;
      }
      ++stored;
      stored_bytes += size;
    }
  }
  if (metrics_ && stored > 0) {
    const double seconds = Since(t0);
    for (size_t i = 0; i < stored; ++i) metrics_->write_seconds.Observe(seconds);
    metrics_->write_bytes.Increment(static_cast<double>(stored_bytes));
    metrics_->units_written.Increment(static_cast<double>(stored));
  }
  if (Status e = EvictToCapacity(); !e.ok())
    for (Status& st : out)
      if (st.ok()) st = e;
  if (opt_.files_over_bound && segments_->FileBytes() > opt_.capacity_bytes + 4 * opt_.segment_bytes)
    opt_.files_over_bound();
  PublishSizes();
  return out;
}

void UnitStore::RemoveFromIndex(const std::string& k, const Meta& m, rocksdb::WriteBatch* b) {
  b->Delete(cf_[kIndex], k);
  b->Delete(cf_[kLru], LruKey(m.access_ms, k));
  if (m.has_parent) b->Delete(cf_[kIndex], k.substr(0, 32) + KeyString(m.parent) + k.substr(32));
}

void UnitStore::ReleasePayload(const SegmentLocation& loc) {
  segments_->Release(loc);
  read_cache_->Erase(loc);
}

Status UnitStore::RemoveLocked(const std::string& k, const Meta& m) {
  rocksdb::WriteBatch b;
  RemoveFromIndex(k, m, &b);
  DS41_RETURN_IF_ERROR(Commit(&b));
  ReleasePayload(m.loc);  // after the commit: the bytes stay until no entry points at them
  units_ -= 1;
  bytes_ -= m.size;
  if (metrics_) metrics_->evicted_bytes.Increment(m.size);
  return Status::Ok();
}

void UnitStore::PublishSizes() {
  if (!metrics_) return;
  metrics_->units.Set(static_cast<double>(units_));
  metrics_->bytes.Set(static_cast<double>(bytes_));
  metrics_->segment_files.Set(static_cast<double>(segments_->FileCount()));
  metrics_->segment_bytes.Set(static_cast<double>(segments_->FileBytes()));
  metrics_->segment_peak_bytes.Set(static_cast<double>(segments_->PeakFileBytes()));
  metrics_->io_buffer_bytes.Set(static_cast<double>(segments_->BufferBytes()));
  uint64_t memtables = 0, readers = 0;
  if (db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kSizeAllMemTables, &memtables))
    metrics_->index_memory_bytes.Set(static_cast<double>(memtables));
  metrics_->index_cache_bytes.Set(static_cast<double>(block_cache_->GetUsage()));
  if (db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimateTableReadersMem, &readers))
    metrics_->table_reader_bytes.Set(static_cast<double>(readers));
}

StatusOr<std::optional<std::string>> UnitStore::Get(const Key32& ns, const Key32& key) {
  return std::move(GetMany(ns, {key}).front());
}

std::vector<StatusOr<std::optional<std::string>>> UnitStore::GetMany(const Key32& ns, const std::vector<Key32>& keys) {
  const auto t0 = Now();
  const size_t n = keys.size();
  std::vector<StatusOr<std::optional<std::string>>> out(n, std::optional<std::string>());
  std::vector<std::string> ks, raw;
  const std::vector<rocksdb::Status> st = ReadIndex(*db_, cf_[kIndex], ns, keys, &ks, &raw);
  // Units the read cache holds (checked bytes) are served from RAM; the others are read from the
  // segments together, so that a chain's neighbouring units come in one device read.
  std::vector<Meta> metas(n);
  std::vector<size_t> from_device;
  std::vector<SegmentLocation> locs;
  std::vector<bool> found(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (st[i].IsNotFound()) continue;
    if (!st[i].ok()) {
      out[i] = FromRocks(st[i], "read index");
    } else if (!Meta::Decode(raw[i], &metas[i])) {
      out[i] = DataLossError("unit store: malformed index entry");
    } else if (const std::shared_ptr<const std::string> held = read_cache_->Get(metas[i].loc)) {
      out[i] = std::optional<std::string>(*held);
      found[i] = true;
    } else {
      from_device.push_back(i);
      locs.push_back(metas[i].loc);
    }
  }
  std::vector<StatusOr<std::string>> read = segments_->ReadMany(locs);
  if (metrics_ && !locs.empty())  // (a device read may have added a buffer to the pool)
    metrics_->io_buffer_bytes.Set(static_cast<double>(segments_->BufferBytes()));
  bool removed = false;
  for (size_t r = 0; r < from_device.size(); ++r) {
    const size_t i = from_device[r];
    StatusOr<std::string>& value = read[r];
    if (value.status().code() == StatusCode::kNotFound) continue;  // removed meanwhile: a miss
    if (!value.ok() && value.status().code() != StatusCode::kDataLoss) {
      out[i] = value.status();
      continue;
    }
    // The unit (or reply record) carries its own CRC32C, checked on every device read (the read
    // cache holds only checked bytes): a bad or truncated one is a counted miss and is deleted,
    // never served.
    if (!value.ok() || !VerifyStoredBytes(*value).ok()) {
      std::lock_guard<std::mutex> l(StripeFor(ks[i]));
      const std::optional<Meta> m = IndexedMeta(ks[i]);
      if (!m || !m->At(metas[i].loc)) continue;  // removed or rewritten meanwhile
      if (Status rs = RemoveLocked(ks[i], *m); !rs.ok()) {
        out[i] = rs;
        continue;
      }
      if (metrics_) {
        metrics_->checksum_failures.Increment();
        metrics_->evictions_checksum.Increment();
      }
      removed = true;
      continue;
    }
    read_cache_->Offer(metas[i].loc, *value);
    out[i] = std::optional<std::string>(std::move(value).value());
    found[i] = true;
  }
  if (removed) PublishSizes();
  // Reads refresh the places in the LRU order of units last refreshed lru_refresh_ms ago or more,
  // in batches (one index write per 64 such reads or per second).
  bool flush = false;
  {
    constexpr size_t kTouchBatch = 64;
    const int64_t now = clock_->NowMs();
    MutexLock l(&touch_mu_);
    for (size_t i = 0; i < n; ++i)
      if (found[i] && RefreshDue(metas[i], now)) touches_.emplace_back(ks[i], now);
    flush = !touches_.empty() && (touches_.size() >= kTouchBatch || now - touches_.front().second >= 1000);
  }
  const Status flushed = flush ? FlushTouches() : Status::Ok();
  const double seconds = Since(t0);
  for (size_t i = 0; i < n; ++i) {
    if (!found[i]) continue;
    if (!flushed.ok()) {
      out[i] = flushed;
      continue;
    }
    if (metrics_) {
      metrics_->read_seconds.Observe(seconds);
      metrics_->read_bytes.Increment(static_cast<double>((*out[i])->size()));
      metrics_->units_read.Increment();
    }
  }
  return out;
}

StatusOr<std::vector<Presence>> UnitStore::Lookup(const Key32& ns, const std::vector<Key32>& keys) {
  std::vector<std::string> ks, values;
  const std::vector<rocksdb::Status> st = ReadIndex(*db_, cf_[kIndex], ns, keys, &ks, &values);
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
  MutexLock el(&evict_mu_);
  uint64_t removed = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kLru]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string lk = it->key().ToString();
    if (lk.size() != 72) continue;
    if (!pred(LruTime(lk))) break;
    const std::string k = lk.substr(8);
    std::lock_guard<std::mutex> l(StripeFor(k));
    const std::optional<Meta> m = IndexedMeta(k);
    if (!m || m->access_ms != LruTime(lk)) {
      rocksdb::WriteBatch b;
      b.Delete(cf_[kLru], lk);  // stale entry: the unit was touched or removed since
      DS41_RETURN_IF_ERROR(Commit(&b));
      continue;
    }
    DS41_RETURN_IF_ERROR(RemoveLocked(k, *m));
    ++removed;
    if (reason) reason->Increment();
  }
  DS41_RETURN_IF_ERROR(FromRocks(it->status(), "eviction scan"));
  PublishSizes();
  return removed;
}

Status UnitStore::EvictToCapacity() {
  if (bytes_ <= opt_.capacity_bytes) return Status::Ok();
  return EvictWhile([this](int64_t) { return bytes_ > opt_.capacity_bytes; },
                    metrics_ ? &metrics_->evictions_capacity : nullptr)
      .status();
}

StatusOr<uint64_t> UnitStore::EvictExpired() {
  uint64_t removed = 0;
  if (opt_.ttl_seconds > 0) {
    const int64_t cutoff = clock_->NowMs() - opt_.ttl_seconds * 1000;
    auto r = EvictWhile([cutoff](int64_t access) { return access < cutoff; }, metrics_ ? &metrics_->evictions_ttl : nullptr);
    DS41_RETURN_IF_ERROR(r.status());
    removed = *r;
  }
  // Segments under half live are rewritten; once the files outgrow the capacity (dead bytes
  // spread over many segments), any under 90% live, so the disk stays near the configured size.
  DS41_RETURN_IF_ERROR(CompactSegments(segments_->FileBytes() > opt_.capacity_bytes ? 0.9 : 0.5));
  return removed;
}

StatusOr<uint64_t> UnitStore::DeleteNamespace(const Key32& ns) {
  MutexLock el(&evict_mu_);
  const std::string lo = KeyString(ns);
  uint64_t removed = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kIndex]));
  for (it->Seek(lo); it->Valid() && it->key().starts_with(lo); it->Next()) {
    const std::string k = it->key().ToString();
    if (k.size() != 64) continue;
    Meta m;
    if (!Meta::Decode(std::string_view(it->value().data(), it->value().size()), &m)) continue;
    std::lock_guard<std::mutex> l(StripeFor(k));
    DS41_RETURN_IF_ERROR(RemoveLocked(k, m));
    ++removed;
    if (metrics_) metrics_->evictions_namespace.Increment();
  }
  DS41_RETURN_IF_ERROR(FromRocks(it->status(), "namespace scan"));
  PublishSizes();
  return removed;
}

Status UnitStore::CompactSegments(double max_live_fraction) {
  std::vector<SegmentUsage> victims;
  for (const SegmentUsage& u : segments_->Usage())
    if (!u.active && u.live_bytes < u.file_bytes && static_cast<double>(u.live_bytes) < max_live_fraction * static_cast<double>(u.file_bytes))
      victims.push_back(u);
  if (victims.empty()) return Status::Ok();
  // The most dead first: the least copying for each byte given back.
  std::sort(victims.begin(), victims.end(), [](const SegmentUsage& a, const SegmentUsage& b) {
    return static_cast<double>(a.live_bytes) * static_cast<double>(b.file_bytes) <
           static_cast<double>(b.live_bytes) * static_cast<double>(a.file_bytes);
  });
  // One compaction at a time; puts, reads and evictions go on (each move rechecks its unit under
  // the unit's stripe lock).
  MutexLock cl(&compact_mu_);
  // Victims are emptied one after another, each file deleted with its last live unit before the next
  // is copied, so the disk holds at most one victim's live bytes more than before. (Moved in the
  // index's key order, every victim drained at once and kept its file until the end of the scan:
  // the disk then held all their live bytes twice, 60 % over the capacity in a soak.) One index scan
  // finds the live units of a group of victims, whose entries are held in memory meanwhile.
  const uint64_t group_live = kCompactGroupSegments * opt_.segment_bytes;
  for (size_t first = 0; first < victims.size();) {
    size_t last = first;
    uint64_t live = 0;
    while (last < victims.size() && (last == first || live + victims[last].live_bytes <= group_live))
      live += victims[last++].live_bytes;
    std::map<uint32_t, std::vector<std::pair<std::string, Meta>>> units;  // by victim segment
    for (size_t i = first; i < last; ++i) units[victims[i].segment];
    {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf_[kIndex]));
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        if (it->key().size() != 64) continue;
        Meta m;
        if (!Meta::Decode(std::string_view(it->value().data(), it->value().size()), &m)) continue;
        if (auto v = units.find(m.loc.segment); v != units.end()) v->second.emplace_back(it->key().ToString(), m);
      }
      DS41_RETURN_IF_ERROR(FromRocks(it->status(), "segment compaction scan"));
    }
    for (size_t i = first; i < last; ++i) {
      std::vector<std::pair<std::string, Meta>>& list = units[victims[i].segment];
      // In file order: neighbours come back in one read.
      std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.second.loc.offset < b.second.loc.offset; });
      for (size_t b = 0; b < list.size(); b += kCompactBatchUnits)
        DS41_RETURN_IF_ERROR(MoveUnits(list, b, std::min(list.size(), b + kCompactBatchUnits)));
      PublishSizes();
    }
    first = last;
  }
  return Status::Ok();
}

Status UnitStore::MoveUnits(const std::vector<std::pair<std::string, Meta>>& units, size_t begin, size_t end) {
  std::vector<SegmentLocation> from;
  for (size_t i = begin; i < end; ++i) from.push_back(units[i].second.loc);
  std::vector<StatusOr<std::string>> bytes = segments_->ReadMany(from);
  std::vector<size_t> read;  // into units
  std::vector<std::string_view> payloads, keys;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!bytes[i].ok()) continue;  // removed meanwhile, or damaged: a read will find and count it
    read.push_back(begin + i);
    payloads.push_back(*bytes[i]);
    keys.push_back(units[begin + i].first);
  }
  if (read.empty()) return Status::Ok();
  std::vector<StatusOr<SegmentLocation>> to = segments_->AppendMany(payloads, opt_.sync_writes);
  Status failed;  // the first append that failed (the others still move)
  const auto locks = LockStripes(keys);
  rocksdb::WriteBatch b;
  std::vector<size_t> moved;  // into read and to
  for (size_t j = 0; j < read.size(); ++j) {
    if (!to[j].ok()) {
      if (failed.ok()) failed = to[j].status();
      continue;
    }
    const auto& [k, was] = units[read[j]];
    std::optional<Meta> now = IndexedMeta(k);
    if (!now || !now->At(was.loc)) {  // removed or rewritten meanwhile
      segments_->Abandon(*to[j]);
      continue;
    }
    now->loc = *to[j];
    b.Put(cf_[kIndex], k, now->Encode());
    moved.push_back(j);
  }
  const Status c = moved.empty() ? Status::Ok() : Commit(&b);
  for (size_t j : moved) {
    if (!c.ok()) {
      segments_->Abandon(*to[j]);
      continue;
    }
    const Meta& was = units[read[j]].second;
    segments_->Commit(*to[j]);
    segments_->Release(was.loc);
    read_cache_->Move(was.loc, *to[j]);
    if (metrics_) metrics_->compacted_bytes.Increment(was.size);
  }
  DS41_RETURN_IF_ERROR(c);
  return failed;
}

Status UnitStore::Compact() {
  DS41_RETURN_IF_ERROR(segments_->Seal());
  DS41_RETURN_IF_ERROR(CompactSegments(1.0));
  rocksdb::CompactRangeOptions cro;
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
  for (int c = kIndex; c <= kLru; ++c) DS41_RETURN_IF_ERROR(FromRocks(db_->CompactRange(cro, cf_[c], nullptr, nullptr), "compact"));
  return Status::Ok();
}

StoreStats UnitStore::stats() const { return {units_.load(), bytes_.load(), opt_.capacity_bytes}; }

bool UnitStore::DirectIo() const { return segments_->DirectIo(); }

}  // namespace ds41
