// SegmentFiles: unit payloads in append-only files next to the RocksDB index (the WiscKey layout).
//
// A ~57 KB payload is written once, at an offset reserved in the active segment, and read back
// with one pread; only its location goes through RocksDB's WAL and memtable. (Payloads inside
// RocksDB, even in integrated blob files, were copied into the WAL, the memtable and then a blob
// file: puts ran at a third of the disk's bandwidth.) Files are named <dir>/<id>.seg, ids only
// grow, so a location never names other bytes later.
//
// Space: each segment counts its live bytes (units whose index entry points into it) and its
// pending appends (written, index not yet committed). A segment that is not the active one is
// deleted when both reach zero; one that is mostly dead is compacted by the store (live units
// copied forward, then released). Bytes appended but never committed (a crash between the two
// steps, a failed index write) are dead from the start.
//
// With O_DIRECT, writes are grouped: concurrent appends reserve room in one staging buffer and copy
// their bytes in (outside the lock, side by side), and a writer thread writes each buffer once those
// copies are in (one large write instead of a page-cache copy per unit; full buffers back to back,
// the one being filled as soon as someone waits for it); each Append returns once its batch is
// written. Staging buffers come from a pool of eight (32 MiB, on huge pages where the kernel allows:
// util/io_buffer.h); an append that finds none free copies in what it has reserved, then waits
// for one. Where the file system refuses O_DIRECT, or when asked, each
// append writes its own bytes through the page cache, in parallel with the others (and with sync,
// one flush of a file covers every append written before it started). A
// batch that ends inside a 4 KiB block rewrites that block in the next batch (unchanged bytes); the
// active segment may end in up to one block of zero padding, cut off once it is finished or closed.
// Trade-off: O_DIRECT leaves freshly written units out of the page cache, so a read soon after a
// write goes to the device (the encoder hands a turn's new KV to its decoder directly, so only later
// turns read them back); a lone writer waits for its own device write. Buffered mode keeps them
// cached, at the cost of a page-cache copy per unit (cache_bench --direct-io true|false compares
// both). Segments appended with O_DIRECT are read with it too, the blocks around a unit (or a run
// of neighbouring units, ReadMany) into a 2 MiB buffer on a huge page, from a pool of at most
// kMaxReadBuffers (allocated as reads first run that many at once; a read that finds none free waits
// for one, so the pool's memory has a bound and does not creep up with each new peak of
// concurrent reads, as a 30-minute soak saw; last returned, first reused: the buffers in use stay
// few and warm, where one per reading thread made a new shard's first reads on each of its I/O
// threads zero a huge page): no page-cache page per read to allocate, fill and copy out (the
// store keeps units read again in RAM itself: read_cache.h).
//
// Thread-safe. Readers keep a file open while they read, so deleting it never fails a read in
// flight. mu_ guards the segments, their counts, the batches and the staging pool (a batch's bytes
// are copied in and written outside it, by whoever reserved them and by the writer thread);
// read_buffers_mu_ guards the read buffer pool; dir_, segment_bytes_ and on_write_ are fixed after Open.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "util/io_buffer.h"
#include "util/status.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

struct SegmentLocation {
  uint32_t segment = 0;
  uint64_t offset = 0;
  uint32_t size = 0;
};

struct SegmentUsage {
  uint32_t segment = 0;
  uint64_t file_bytes = 0, live_bytes = 0;
  bool active = false;
};

class SegmentFiles {
 public:
  // Opens `dir` (created if missing) and starts a new active segment; the segments already there
  // stay readable. Call Recount for every live location, then DropUnreferenced. `direct_io` false:
  // appends go through the page cache even where O_DIRECT works.
  // `on_write` (optional) is told the bytes and seconds of every payload write: a batch with O_DIRECT
  // (its sync included), a unit's own write when buffered.
  using WriteObserver = std::function<void(uint64_t bytes, double seconds)>;
  static StatusOr<std::unique_ptr<SegmentFiles>> Open(const std::string& dir, uint64_t segment_bytes,
                                                      bool direct_io = true, WriteObserver on_write = nullptr);
  ~SegmentFiles();

  // Writes `bytes` (to the device, or the page cache where O_DIRECT is refused; with `sync` also
  // flushed to stable storage) and returns its location, pending until Commit or Abandon.
  StatusOr<SegmentLocation> Append(std::string_view bytes, bool sync);
  // Append for several units at once (with O_DIRECT their bytes share batches); one result per unit,
  // in order.
  std::vector<StatusOr<SegmentLocation>> AppendMany(const std::vector<std::string_view>& units, bool sync);
  // The index now points at `loc`: its bytes are live.
  void Commit(const SegmentLocation& loc);
  // The index write failed: `loc` is dead.
  void Abandon(const SegmentLocation& loc);
  // The index no longer points at `loc` (removed, replaced, moved).
  void Release(const SegmentLocation& loc);

  // Recovery: `loc` is live (from the index). Returns false when its segment file is missing or
  // too short to hold it (the caller drops the entry).
  bool Recount(const SegmentLocation& loc);
  // Recovery: deletes segment files with no live bytes (other than the active one).
  Status DropUnreferenced();

  // The bytes at `loc`; NotFound when its segment was deleted meanwhile (the unit was removed).
  StatusOr<std::string> Read(const SegmentLocation& loc) const;
  // Read for each location, in order; locations that lie close together in a segment (as a chain's
  // units appended together do) come in one device read.
  std::vector<StatusOr<std::string>> ReadMany(const std::vector<SegmentLocation>& locs) const;

  // Starts a new active segment, so that the previous one can be compacted or dropped.
  Status Seal();

  // Every segment, for compaction decisions.
  std::vector<SegmentUsage> Usage() const;
  uint64_t FileBytes() const;  // on disk, dead bytes included
  // The most FileBytes has been since Open: what the disk must have room for (compaction's copies
  // and the files they empty exist together for a while; a sampled FileBytes misses such peaks).
  uint64_t PeakFileBytes() const;
  bool DirectIo() const;       // the active segment is appended to with O_DIRECT
  bool ReadsDirect() const;    // and read with it
  size_t FileCount() const;
  // Memory held by the O_DIRECT staging and read buffer pools (kept for reuse once allocated).
  uint64_t BufferBytes() const;
  // Direct reads at once, each with a 2 MiB pooled buffer; more wait for one. Eight keep a
  // device's queue busy (four parallel 1 MiB reads already moved 3.0 GB/s here).
  static constexpr size_t kMaxReadBuffers = 8;

 private:
  struct File;
  struct Batch;
  struct Segment {
    std::shared_ptr<File> file;
    uint64_t size = 0;  // bytes reserved (the file's length once appends finish)
    uint64_t live = 0;
    uint64_t pending = 0;  // appends not yet committed or abandoned
  };
  SegmentFiles() = default;
  std::string PathOf(uint32_t id) const;
  Status StartSegmentLocked(bool drop_previous) DS41_REQUIRES(mu_);
  // Deletes segment `id` if it is inactive, without live bytes or pending appends.
  void MaybeDropLocked(uint32_t id) DS41_REQUIRES(mu_);
  void AbandonLocked(const SegmentLocation& loc) DS41_REQUIRES(mu_);
  // Cuts `f` back to the bytes written (its O_DIRECT padding); for a finished or closing segment.
  void CutPaddingLocked(File& f) DS41_REQUIRES(mu_);
  // Starts a new active segment where `bytes` would overflow the active one (unless it is empty).
  Status RollOverForLocked(size_t bytes) DS41_REQUIRES(mu_);
  // Reserves `bytes` at the active segment's end (RollOverForLocked first), pending until Commit or
  // Abandon.
  StatusOr<SegmentLocation> ReserveInActiveLocked(size_t bytes) DS41_REQUIRES(mu_);
  // Room for `bytes` at the open batch's end (queueing a full one for writing first): its location,
  // its batch, and where in the batch's buffer the caller copies the bytes (then counts the copy
  // done: the batch is written only once every reserved copy is in). None (and nothing reserved)
  // when the batch needs a staging buffer and all are held.
  struct Reserved {
    SegmentLocation loc;
    std::shared_ptr<Batch> batch;
    uint8_t* to = nullptr;
  };
  StatusOr<std::optional<Reserved>> ReserveLocked(std::string_view bytes, bool sync) DS41_REQUIRES(mu_);
  // A pooled staging buffer is free again.
  void ReturnBufferLocked(IoBuffer buf) DS41_REQUIRES(mu_);
  // Returns once `b` is written (waiting lets go of mu_).
  void AwaitLocked(const std::shared_ptr<Batch>& b) DS41_REQUIRES(mu_);
  // The writer thread: writes batches in order until the destructor stops it.
  void WriterLoop() DS41_EXCLUDES(mu_);
  // Counts `copies` of the copies reserved in `b` done (its writer waits for all of them).
  void CopiesDoneLocked(Batch& b, int copies) DS41_REQUIRES(mu_);
  // An empty batch appending to the active segment at `start`, to carry the bytes of `previous`
  // from the block `start` lies in (null: none); previous's writer copies them in before its write.
  std::shared_ptr<Batch> NewBatchLocked(uint64_t start, Batch* previous) DS41_REQUIRES(mu_);
  Status WriteBatch(const Batch& b) const;
  // Reads the run of locs[idx[0..n)] (one segment, sorted by offset, close together, ending at
  // file offset `end`) into `out`.
  void ReadRun(const std::vector<SegmentLocation>& locs, const size_t* idx, size_t n, uint64_t end,
               std::vector<StatusOr<std::string>>* out) const;
  // Buffered appends: each unit's bytes go from the caller's buffer to its reserved offset, with no
  // staging copy and concurrently with other appenders (page-cache writes need no order). mu_ is
  // released while writing.
  std::vector<StatusOr<SegmentLocation>> AppendBuffered(const std::vector<std::string_view>& units, bool sync)
      DS41_REQUIRES(mu_);
  Status WriteAt(int fd, std::string_view bytes, uint64_t offset, uint32_t segment) const;
  // A direct read's buffer from the pool (a new one while the pool holds fewer than
  // kMaxReadBuffers; else it waits for one), and back.
  IoBuffer TakeReadBuffer() const DS41_EXCLUDES(read_buffers_mu_);
  void ReturnReadBuffer(IoBuffer buf) const DS41_EXCLUDES(read_buffers_mu_);
  // Returns once a flush of `f` begun after this caller's buffered writes has finished (mu_ is
  // released while waiting and flushing).
  Status SyncBufferedLocked(File& f, uint32_t segment) DS41_REQUIRES(mu_);

  std::string dir_;
  uint64_t segment_bytes_ = 0;
  bool direct_io_ DS41_GUARDED_BY(mu_) = true;  // cleared for good once a segment refuses O_DIRECT
  WriteObserver on_write_;
  mutable Mutex mu_;
  std::map<uint32_t, Segment> segments_ DS41_GUARDED_BY(mu_);
  uint32_t active_ DS41_GUARDED_BY(mu_) = 0;
  uint64_t file_bytes_ DS41_GUARDED_BY(mu_) = 0;
  uint64_t peak_file_bytes_ DS41_GUARDED_BY(mu_) = 0;

  // Group writes: appends fill open_; the writer takes sealed_ batches (full ones, and the last of
  // a finished segment) first, then open_ once it has waiters, one write at a time; a finished write
  // wakes its batch's appenders.
  std::shared_ptr<Batch> open_ DS41_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Batch>> sealed_ DS41_GUARDED_BY(mu_);
  std::vector<IoBuffer> spare_buffers_ DS41_GUARDED_BY(mu_);  // the pool's free staging buffers
  size_t pool_buffers_ DS41_GUARDED_BY(mu_) = 0;              // the pool's staging buffers, free or held
  CondVar buffer_cv_;    // appenders wait here for a free one
  CondVar done_cv_;  // buffered appends' flushes (SyncBufferedLocked)
  bool writing_ DS41_GUARDED_BY(mu_) = false;
  bool stop_ DS41_GUARDED_BY(mu_) = false;
  CondVar writer_cv_;  // the writer waits here for a batch to write
  CondVar copied_cv_;  // and here for the copies into the one it took
  mutable Mutex read_buffers_mu_;
  // Direct reads' free buffers, the last returned at the back.
  mutable std::vector<IoBuffer> read_buffers_ DS41_GUARDED_BY(read_buffers_mu_);
  mutable size_t read_pool_ DS41_GUARDED_BY(read_buffers_mu_) = 0;  // free or in use
  mutable CondVar read_buffer_cv_;  // readers wait here when all are in use
  mutable std::atomic<uint64_t> buffer_bytes_{0};  // both pools' buffers, free or in use
  std::thread writer_;                 // (last: started once the rest is set up, joined first)
};

}  // namespace ds41
