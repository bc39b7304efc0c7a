#include "cache_service/store/segment_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <thread>

#include "util/check.h"
#include "util/mutex.h"
#include "util/process.h"

namespace ds41 {
namespace {

Status Errno(const std::string& what, int err) { return UnavailableError("segment files: " + what + ": " + std::strerror(err)); }
Status Errno(const std::string& what) { return Errno(what, errno); }

// "<digits>.seg" -> id.
std::optional<uint32_t> ParseName(std::string_view name) {
  constexpr std::string_view kExt = ".seg";
  if (name.size() <= kExt.size() || name.substr(name.size() - kExt.size()) != kExt) return std::nullopt;
  const std::string_view digits = name.substr(0, name.size() - kExt.size());
  if (digits.size() > 9) return std::nullopt;
  uint32_t id = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + static_cast<uint32_t>(c - '0');
  }
  return id;
}

// O_DIRECT offsets, lengths and buffers are multiples of this (every logical block size in use).
constexpr uint64_t kDirectAlign = 4096;
// A batch's staging buffer: ~16 units; a larger unit gets a buffer of its own.
constexpr size_t kBatchBytes = 4 << 20;
// Staging buffers at most (32 MiB): allocated as needed, then kept. A fresh buffer costs the
// kernel's zeroing and, under a hypervisor that reclaims freed guest memory, the host's too: the
// store-alone bench spent 76% of its CPU zeroing pages when each batch past four spare ones got a
// fresh mapping. Eight keep seven full batches queued behind the write in progress.
constexpr size_t kPoolBuffers = 8;
// Reads: locations at most kReadGap apart in a segment are read as one run of at most kReadRun
// bytes (a gap is read through: one unit another writer put between two of a chain's). Here four
// parallel 1 MiB reads from huge pages moved 3.0 GB/s, sixteen parallel 57 KB reads 1.5-1.8.
constexpr uint64_t kReadGap = 64 << 10;
constexpr uint64_t kReadRun = 1 << 20;
// A direct read's buffer: a run and its blocks' slack, one huge page.
constexpr size_t kReadBufferBytes = 2 << 20;

// Whether O_DIRECT on `fd` takes kDirectAlign-aligned offsets, lengths and buffers, where the
// kernel says (statx, Linux 6.1+); assumed so where it does not.
bool DirectAlignmentFits(int fd) {
#ifdef STATX_DIOALIGN
  struct statx stx {};
  if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN) != 0)
    return stx.stx_dio_offset_align != 0 && kDirectAlign % stx.stx_dio_offset_align == 0 &&
           stx.stx_dio_mem_align != 0 && kDirectAlign % stx.stx_dio_mem_align == 0;
#else
  (void)fd;
#endif
  return true;
}

// An O_DIRECT read descriptor for `path`, or -1 where the file system refuses one.
int OpenDirectRead(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (fd >= 0 && !DirectAlignmentFits(fd)) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads [offset, offset + n) of `fd` into `dst` (EINTR retried); false with errno set on an error,
// true with *got < n at the end of the file. `direct`: a short read is the end (a second, unaligned
// O_DIRECT read would be refused).
bool PreadFully(int fd, uint8_t* dst, size_t n, uint64_t offset, bool direct, size_t* got) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    done += static_cast<size_t>(r);
    if (r == 0 || direct) break;
  }
  *got = done;
  return true;
}

}  // namespace

struct SegmentFiles::File {
  int fd = -1;          // reads through the page cache
  // Reads with O_DIRECT, where the store writes with it and the file system allows it: straight
  // from the device into a reused buffer, with no page-cache page to allocate, fill and copy out
  // (on this project's VMs allocating a fresh page cost more than the device read). -1: use `fd`.
  int direct_fd = -1;
  std::atomic<bool> direct_refused{false};  // a direct read failed with EINVAL: `fd` from then on
  int write_fd = -1;    // appends: O_DIRECT where the file system allows it
  uint64_t align = 1;   // kDirectAlign with O_DIRECT
  uint64_t written_end = 0;  // end of the bytes written (guarded by mu_); past it, O_DIRECT padding
  // Buffered appends' flushes (guarded by mu_): appends written, how many of them a finished
  // fdatasync covers, and whether one runs (the others wait for it, or for the next).
  uint64_t appended = 0, synced = 0;
  bool syncing = false;
  ~File() {
    if (fd >= 0) close(fd);
    if (direct_fd >= 0) close(direct_fd);
    if (write_fd >= 0) close(write_fd);
  }
};

struct SegmentFiles::Batch {
  std::shared_ptr<File> file;
  uint32_t segment = 0;
  uint64_t start = 0;  // file offset of buf[0]: a multiple of file->align
  IoBuffer buf;        // from the pool at its first append (a unit larger than a batch: its own)
  size_t capacity = 0, len = 0;
  size_t fresh = 0;    // buf[0, fresh) was carried from the previous batch (already written)
  std::string carried;  // those bytes, set by the previous batch's writer; in buf before the write
  bool sync = false;
  bool done = false;
  Status status;
  // Its appenders wait here (mu_ held), so that a finished write wakes only those it concerns.
  CondVar cv;
  int waiters = 0;
  int copying = 0;  // appenders copying their bytes in (outside mu_): its writer waits for them
  // The batch continuing this one in the same block: its carried start is copied from this buffer
  // once this one's copies are in (by this one's writer, before the write).
  std::shared_ptr<Batch> carry_to;
  bool pooled() const { return buf != nullptr && capacity == kBatchBytes; }
};

SegmentFiles::~SegmentFiles() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  writer_cv_.NotifyOne();
  if (writer_.joinable()) writer_.join();
  MutexLock l(&mu_);
  if (open_ != nullptr) CutPaddingLocked(*open_->file);  // (no writes run any more)
}

void SegmentFiles::CutPaddingLocked(File& f) {
  // Once per segment rather than after every write: cutting a file inside a block makes ext4 read
  // and zero that block through the page cache, and the next O_DIRECT write then flushes it first.
  // Best effort: padding that stays is never read (locations come from the index).
  if (f.written_end % f.align != 0) (void)!ftruncate(f.write_fd, static_cast<off_t>(f.written_end));
}

std::string SegmentFiles::PathOf(uint32_t id) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%09u.seg", id);
  return dir_ + "/" + name;
}

// Unanalysed: it fills in the new object's guarded members before the writer thread starts, when
// no other thread can see the object.
StatusOr<std::unique_ptr<SegmentFiles>> SegmentFiles::Open(const std::string& dir, uint64_t segment_bytes, bool direct_io,
                                                           WriteObserver on_write) DS41_NO_THREAD_SAFETY_ANALYSIS {
  if (segment_bytes == 0) return InvalidArgumentError("segment files: segment size must be positive");
  std::unique_ptr<SegmentFiles> s(new SegmentFiles());
  s->dir_ = dir;
  s->direct_io_ = direct_io;
  s->on_write_ = std::move(on_write);
  s->segment_bytes_ = segment_bytes;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return UnavailableError("segment files: create " + dir + ": " + ec.message());
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Errno("open " + dir);
  uint32_t max_id = 0;
  while (dirent* e = readdir(d)) {
    const auto id = ParseName(e->d_name);
    if (!id) continue;
    auto f = std::make_shared<File>();
    f->fd = open(s->PathOf(*id).c_str(), O_RDONLY | O_CLOEXEC);
    if (direct_io) f->direct_fd = OpenDirectRead(s->PathOf(*id));
    struct stat st {};
    if (f->fd < 0 || fstat(f->fd, &st) != 0) {
      closedir(d);
      return Errno("open " + s->PathOf(*id));
    }
    s->segments_[*id] = Segment{f, static_cast<uint64_t>(st.st_size), 0, 0};
    s->file_bytes_ += static_cast<uint64_t>(st.st_size);
    max_id = std::max(max_id, *id);
  }
  closedir(d);
  s->active_ = max_id;
  {
    MutexLock l(&s->mu_);
    s->peak_file_bytes_ = s->file_bytes_;
    DS41_RETURN_IF_ERROR(s->StartSegmentLocked(/*drop_previous=*/false));  // (not counted yet)
  }
  s->writer_ = std::thread([p = s.get()] {
    NameThisThread("segment-writer");
    p->WriterLoop();
  });
  return s;
}

Status SegmentFiles::StartSegmentLocked(bool drop_previous) {
  const uint32_t id = active_ + 1;
  auto f = std::make_shared<File>();
  f->write_fd = open(PathOf(id).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (f->write_fd < 0) return Errno("create " + PathOf(id));
  if (direct_io_) {
    // Refused by some file systems (tmpfs), or wanting more alignment than kDirectAlign: appends
    // then stay buffered, still grouped.
    const int direct = open(PathOf(id).c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT);
    if (direct >= 0 && DirectAlignmentFits(direct)) {
      close(f->write_fd);
      f->write_fd = direct;
      f->align = kDirectAlign;
    } else {
      // Whatever the reason (even a transient one), later segments stay buffered too: the modes do
      // not alternate, since a buffered call cannot append to a direct segment it rolls over into.
      if (direct >= 0) close(direct);
      direct_io_ = false;
    }
  }
  f->fd = open(PathOf(id).c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) return Errno("open " + PathOf(id));
  // (A segment appended through the page cache is read through it too: a direct read would first
  // have to flush the dirty pages it covers.)
  if (f->align > 1) f->direct_fd = OpenDirectRead(PathOf(id));
  // The new name must survive a power loss before anything it holds is acknowledged as synced.
  const int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  const uint32_t previous = active_;
  segments_[id] = Segment{f, 0, 0, 0};
  active_ = id;
  // The finished segment's last appends are written before anything of the new one; the writer of
  // the last of them cuts its padding, or it is cut here when all of it was written already.
  if (open_ != nullptr && open_->fresh < open_->len) {
    sealed_.push_back(std::move(open_));
    writer_cv_.NotifyOne();
  } else if (open_ != nullptr && !writing_) {
    CutPaddingLocked(*open_->file);
  }
  open_ = NewBatchLocked(0, nullptr);
  if (drop_previous) MaybeDropLocked(previous);  // e.g. all it held was removed already
  return Status::Ok();
}

std::shared_ptr<SegmentFiles::Batch> SegmentFiles::NewBatchLocked(uint64_t start, Batch* previous) {
  auto b = std::make_shared<Batch>();
  b->file = segments_[active_].file;
  b->segment = active_;
  b->start = start - start % b->file->align;
  if (b->file->align == 1) return b;  // buffered appends write from the callers' bytes (AppendBuffered)
  b->capacity = kBatchBytes;
  if (previous != nullptr) {  // the partial block at the start, as the previous batch writes it
    b->fresh = b->len = static_cast<size_t>(start - b->start);
    if (b->len > 0) previous->carry_to = b;  // (filled once the previous batch's copies are in)
  }
  return b;
}

void SegmentFiles::MaybeDropLocked(uint32_t id) {
  auto it = segments_.find(id);
  if (it == segments_.end() || id == active_ || it->second.live > 0 || it->second.pending > 0) return;
  file_bytes_ -= it->second.size;
  unlink(PathOf(id).c_str());  // readers in flight keep their descriptor
  segments_.erase(it);
}

StatusOr<SegmentLocation> SegmentFiles::Append(std::string_view bytes, bool sync) {
  return std::move(AppendMany({bytes}, sync).front());
}

std::vector<StatusOr<SegmentLocation>> SegmentFiles::AppendMany(const std::vector<std::string_view>& units, bool sync) {
  MutexLock l(&mu_);
  if (open_->file->align == 1) return AppendBuffered(units, sync);
  std::vector<StatusOr<SegmentLocation>> out;
  std::vector<std::shared_ptr<Batch>> batches;  // each unit's
  std::vector<uint8_t*> to;                     // where its bytes go in the batch
  out.reserve(units.size());
  size_t copied = 0;  // units before it are copied in
  // The copies run outside the lock, beside other appenders' and the write in progress; each batch
  // is counted copied as soon as this call's units in it are, so that the writer can start on it
  // while the rest are copied (a unit's batch is its predecessor's or the next one).
  auto copy_reserved = [&]() DS41_REQUIRES(mu_) {
    {
      MutexUnlock u(&mu_);
      for (size_t i = copied; i < batches.size();) {
        size_t j = i;
        for (; j < batches.size() && batches[j] == batches[i]; ++j)
          if (to[j] != nullptr) std::memcpy(to[j], units[j].data(), units[j].size());
        if (batches[i] != nullptr) {
          MutexLock g(&mu_);
          CopiesDoneLocked(*batches[i], static_cast<int>(j - i));
        }
        i = j;
      }
    }
    copied = batches.size();
  };
  try {
    while (out.size() < units.size()) {
      auto r = ReserveLocked(units[out.size()], sync);
      if (r.ok() && !r->has_value()) {
        // No staging buffer free. Those held may be waiting for this call's copies: they go first,
        // and only a call with none outstanding waits (so every held buffer gets written).
        if (copied < batches.size()) {
          copy_reserved();
        } else {
          buffer_cv_.Wait(&mu_);
        }
        continue;
      }
      if (!r.ok()) {
        out.push_back(r.status());
        batches.push_back(nullptr);
        to.push_back(nullptr);
        continue;
      }
      out.push_back((*r)->loc);
      batches.push_back(std::move((*r)->batch));
      to.push_back((*r)->to);
    }
  } catch (...) {  // a staging buffer could not be allocated: no writer may wait for our copies
    for (size_t i = copied; i < batches.size(); ++i)
      if (batches[i] != nullptr) CopiesDoneLocked(*batches[i], 1);
    throw;
  }
  copy_reserved();
  for (size_t i = 0; i < units.size(); ++i) {
    if (batches[i] == nullptr) continue;
    AwaitLocked(batches[i]);
    if (!batches[i]->status.ok()) {
      AbandonLocked(*out[i]);
      out[i] = batches[i]->status;
    }
  }
  return out;
}

std::vector<StatusOr<SegmentLocation>> SegmentFiles::AppendBuffered(const std::vector<std::string_view>& units,
                                                                    bool sync) {
  std::vector<StatusOr<SegmentLocation>> out;
  std::vector<std::shared_ptr<File>> files;  // each unit's (null: not reserved)
  out.reserve(units.size());
  for (std::string_view bytes : units) {
    out.push_back(ReserveInActiveLocked(bytes.size()));
    files.push_back(out.back().ok() ? segments_[active_].file : nullptr);
  }
  std::vector<Status> st(units.size());
  {
    MutexUnlock u(&mu_);
    for (size_t i = 0; i < units.size(); ++i) {
      if (files[i] == nullptr) continue;
      const auto t0 = std::chrono::steady_clock::now();
      st[i] = WriteAt(files[i]->write_fd, units[i], out[i]->offset, out[i]->segment);
      if (on_write_ && st[i].ok())
        on_write_(units[i].size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  if (sync) {  // per file written (two where the segment rolled over)
    for (size_t i = 0; i < units.size(); ++i) {
      if (files[i] == nullptr || (i > 0 && files[i] == files[i - 1])) continue;
      const Status synced = SyncBufferedLocked(*files[i], out[i]->segment);
      for (size_t j = i; j < units.size() && files[j] == files[i]; ++j)
        if (st[j].ok()) st[j] = synced;
    }
  }
  for (size_t i = 0; i < units.size(); ++i) {
    if (files[i] == nullptr || st[i].ok()) continue;
    AbandonLocked(*out[i]);
    out[i] = st[i];
  }
  return out;
}

Status SegmentFiles::SyncBufferedLocked(File& f, uint32_t segment) {
  // Group commit of the flushes: a flush started after this caller's writes covers them, so concurrent
  // callers share one fdatasync instead of queueing one each.
  const uint64_t mine = ++f.appended;
  while (f.synced < mine) {
    if (f.syncing) {
      done_cv_.Wait(&mu_);
      continue;
    }
    f.syncing = true;
    const uint64_t upto = f.appended;
    bool ok;
    int err;
    {
      MutexUnlock u(&mu_);
      ok = fdatasync(f.write_fd) == 0;
      err = errno;
    }
    f.syncing = false;
    if (ok) f.synced = std::max(f.synced, upto);
    done_cv_.NotifyAll();
    if (!ok) return Errno("sync " + PathOf(segment), err);  // (the others waiting try again themselves)
  }
  return Status::Ok();
}

Status SegmentFiles::RollOverForLocked(size_t bytes) {
  const Segment& a = segments_[active_];
  return a.size > 0 && a.size + bytes > segment_bytes_ ? StartSegmentLocked(/*drop_previous=*/true) : Status::Ok();
}

StatusOr<SegmentLocation> SegmentFiles::ReserveInActiveLocked(size_t bytes) {
  DS41_RETURN_IF_ERROR(RollOverForLocked(bytes));
  Segment& a = segments_[active_];
  const SegmentLocation loc{active_, a.size, static_cast<uint32_t>(bytes)};
  a.size += bytes;
  a.pending += 1;
  file_bytes_ += bytes;
  peak_file_bytes_ = std::max(peak_file_bytes_, file_bytes_);
  return loc;
}

StatusOr<std::optional<SegmentFiles::Reserved>> SegmentFiles::ReserveLocked(std::string_view bytes, bool sync) {
  // Where the bytes go first (a new segment, a new batch), then a buffer to stage them in, and only
  // then the reservation itself, so that a missing buffer leaves nothing half done.
  DS41_RETURN_IF_ERROR(RollOverForLocked(bytes.size()));
  if (open_->len + bytes.size() > open_->capacity && open_->fresh < open_->len) {
    // Full: queued for writing as it is (its appenders wait for it), and a new batch continues it.
    std::shared_ptr<Batch> full = std::move(open_);
    open_ = NewBatchLocked(full->start + full->len, full.get());
    sealed_.push_back(std::move(full));
    writer_cv_.NotifyOne();
  }
  Batch& b = *open_;
  if (b.len + bytes.size() > b.capacity) {  // a unit larger than a batch: one of its own size
    // (Nothing is being copied into it: it holds no appended bytes yet, only its carried start.)
    DS41_CHECK(b.copying == 0, "segment files: growing a batch being copied into");
    const size_t capacity = (b.len + bytes.size() + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
    IoBuffer grown = AllocateIoBuffer(capacity);
    if (b.pooled()) ReturnBufferLocked(std::move(b.buf));
    b.buf = std::move(grown);
    b.capacity = capacity;
  } else if (b.buf == nullptr) {
    if (spare_buffers_.empty() && pool_buffers_ == kPoolBuffers) return std::optional<Reserved>();
    if (spare_buffers_.empty()) {
      b.buf = AllocateIoBuffer(kBatchBytes);
      ++pool_buffers_;
      buffer_bytes_.fetch_add(kBatchBytes, std::memory_order_relaxed);
    } else {
      b.buf = std::move(spare_buffers_.back());
      spare_buffers_.pop_back();
    }
  }
  auto loc = ReserveInActiveLocked(bytes.size());
  DS41_RETURN_IF_ERROR(loc.status());
  DS41_CHECK(b.start + b.len == loc->offset, "segment files: batch end " << b.start + b.len << " vs segment end " << loc->offset);
  Reserved r{*loc, open_, b.buf.get() + b.len};
  b.len += bytes.size();
  b.sync = b.sync || sync;
  ++b.copying;
  return std::optional<Reserved>(std::move(r));
}

void SegmentFiles::ReturnBufferLocked(IoBuffer buf) {
  spare_buffers_.push_back(std::move(buf));
  // Every waiter looks again: one woken for this buffer may find the open batch equipped meanwhile
  // and leave it, and notify_one would then strand the others beside a free buffer.
  buffer_cv_.NotifyAll();
}

void SegmentFiles::AwaitLocked(const std::shared_ptr<Batch>& mine) {
  if (mine->done) return;
  ++mine->waiters;
  if (!writing_) writer_cv_.NotifyOne();  // (a busy writer looks again once its write is done)
  mine->cv.Wait(&mu_, [&] { return mine->done; });
  --mine->waiters;
}

void SegmentFiles::WriterLoop() {
  // One thread writes every batch, back to back: sealed ones first (so a file's batches land in
  // order), then the open one once someone waits for it. Appenders only wait; a write that ends
  // goes straight on to the next instead of waking another thread to write it (a hand-off that
  // left the device idle for 10-15% of a 4-client put stream on a 2-vCPU host).
  MutexLock l(&mu_);
  auto owed = [&]() DS41_REQUIRES(mu_) {
    return !sealed_.empty() || (open_->waiters > 0 && open_->fresh < open_->len);
  };
  for (;;) {
    writer_cv_.Wait(&mu_, [&]() DS41_REQUIRES(mu_) { return stop_ || owed(); });
    if (!owed()) return;  // stopping, nothing owed
    std::shared_ptr<Batch> next;
    if (!sealed_.empty()) {
      next = std::move(sealed_.front());
      sealed_.pop_front();
    } else {
      next = std::move(open_);
      open_ = NewBatchLocked(next->start + next->len, next.get());
    }
    writing_ = true;
    copied_cv_.Wait(&mu_, [&] { return next->copying == 0; });
    std::memcpy(next->buf.get(), next->carried.data(), next->carried.size());
    if (next->carry_to != nullptr) {  // the next batch starts inside this one's last block
      Batch& c = *next->carry_to;
      c.carried.assign(reinterpret_cast<const char*>(next->buf.get()) + (c.start - next->start), c.fresh);
      next->carry_to = nullptr;
    }
    Status st;
    {
      MutexUnlock u(&mu_);
      const auto t0 = std::chrono::steady_clock::now();
      st = WriteBatch(*next);
      if (on_write_ && st.ok())
        on_write_(next->len - next->fresh,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (st.ok()) next->file->written_end = next->start + next->len;
    // A finished segment's last write: its O_DIRECT padding goes now.
    if (st.ok() && next->file != open_->file && (sealed_.empty() || sealed_.front()->file != next->file))
      CutPaddingLocked(*next->file);
    writing_ = false;
    next->status = std::move(st);
    next->done = true;
    if (next->pooled()) ReturnBufferLocked(std::move(next->buf));
    next->cv.NotifyAll();
  }
}

void SegmentFiles::CopiesDoneLocked(Batch& b, int copies) {
  // (Only the writer waits on copied_cv_, for one batch: a wake for another one just looks again.)
  b.copying -= copies;
  if (b.copying == 0) copied_cv_.NotifyOne();
}

Status SegmentFiles::WriteBatch(const Batch& b) const {
  const File& f = *b.file;
  // From the batch's start (O_DIRECT: block-aligned, its carried bytes rewritten unchanged) to its
  // end, padded to a block with O_DIRECT.
  const size_t to = (b.len + f.align - 1) / f.align * f.align;
  if (to > b.len) std::memset(b.buf.get() + b.len, 0, to - b.len);
  DS41_RETURN_IF_ERROR(WriteAt(f.write_fd, {reinterpret_cast<const char*>(b.buf.get()), to}, b.start, b.segment));
  if (b.sync && fdatasync(f.write_fd) != 0) return Errno("sync " + PathOf(b.segment));
  return Status::Ok();
}

Status SegmentFiles::WriteAt(int fd, std::string_view bytes, uint64_t offset, uint32_t segment) const {
  for (size_t from = 0; from < bytes.size();) {
    const ssize_t n = pwrite(fd, bytes.data() + from, bytes.size() - from, static_cast<off_t>(offset + from));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("write " + PathOf(segment), n < 0 ? errno : EIO);
    from += static_cast<size_t>(n);
  }
  return Status::Ok();
}

void SegmentFiles::Commit(const SegmentLocation& loc) {
  MutexLock l(&mu_);
  auto it = segments_.find(loc.segment);
  if (it == segments_.end()) return;
  it->second.pending -= 1;
  it->second.live += loc.size;
}

void SegmentFiles::Abandon(const SegmentLocation& loc) {
  MutexLock l(&mu_);
  AbandonLocked(loc);
}

void SegmentFiles::AbandonLocked(const SegmentLocation& loc) {
  auto it = segments_.find(loc.segment);
  if (it == segments_.end()) return;
  it->second.pending -= 1;
  MaybeDropLocked(loc.segment);
}

void SegmentFiles::Release(const SegmentLocation& loc) {
  MutexLock l(&mu_);
  auto it = segments_.find(loc.segment);
  if (it == segments_.end()) return;
  it->second.live -= std::min<uint64_t>(it->second.live, loc.size);
  MaybeDropLocked(loc.segment);
}

bool SegmentFiles::Recount(const SegmentLocation& loc) {
  MutexLock l(&mu_);
  auto it = segments_.find(loc.segment);
  if (it == segments_.end() || loc.segment == active_ || loc.offset + loc.size > it->second.size) return false;
  it->second.live += loc.size;
  return true;
}

Status SegmentFiles::DropUnreferenced() {
  MutexLock l(&mu_);
  std::vector<uint32_t> ids;
  for (const auto& [id, seg] : segments_) ids.push_back(id);
  for (uint32_t id : ids) MaybeDropLocked(id);
  return Status::Ok();
}

StatusOr<std::string> SegmentFiles::Read(const SegmentLocation& loc) const { return std::move(ReadMany({loc}).front()); }

std::vector<StatusOr<std::string>> SegmentFiles::ReadMany(const std::vector<SegmentLocation>& locs) const {
  std::vector<StatusOr<std::string>> out(locs.size(), std::string());
  std::vector<size_t> order(locs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(locs[a].segment, locs[a].offset) < std::pair(locs[b].segment, locs[b].offset);
  });
  for (size_t i = 0; i < order.size();) {
    const SegmentLocation& first = locs[order[i]];
    uint64_t end = first.offset + first.size;
    size_t j = i + 1;
    for (; j < order.size(); ++j) {
      const SegmentLocation& l = locs[order[j]];
      const uint64_t e = std::max(end, l.offset + l.size);
      if (l.segment != first.segment || l.offset > end + kReadGap || e - first.offset > kReadRun) break;
      end = e;
    }
    ReadRun(locs, order.data() + i, j - i, end, &out);
    i = j;
  }
  return out;
}

void SegmentFiles::ReadRun(const std::vector<SegmentLocation>& locs, const size_t* idx, size_t n, uint64_t end,
                           std::vector<StatusOr<std::string>>* out) const {
  const uint32_t segment = locs[idx[0]].segment;
  const uint64_t begin = locs[idx[0]].offset;
  auto all = [&](const Status& st) {
    for (size_t k = 0; k < n; ++k) (*out)[idx[k]] = st;
  };
  std::shared_ptr<File> file;
  {
    MutexLock l(&mu_);
    auto it = segments_.find(segment);
    if (it == segments_.end()) return all(NotFoundError("segment files: segment gone"));
    file = it->second.file;
  }
  // Each location's bytes from the `got` bytes read at `base` (file offset `from`).
  auto slice = [&](const uint8_t* base, uint64_t from, size_t got) {
    for (size_t k = 0; k < n; ++k) {
      const SegmentLocation& l = locs[idx[k]];
      if (l.offset + l.size > from + got) {
        (*out)[idx[k]] = DataLossError("segment files: " + PathOf(segment) + " is shorter than its index says");
      } else {
        (*out)[idx[k]] = std::string(reinterpret_cast<const char*>(base) + (l.offset - from), l.size);
      }
    }
  };
  if (file->direct_fd >= 0 && !file->direct_refused.load(std::memory_order_relaxed)) {
    // The blocks around the run, into a pooled buffer (one huge page: any run of several units
    // fits; a unit larger than it gets a buffer of its own).
    const uint64_t start = begin / kDirectAlign * kDirectAlign;
    const size_t span = static_cast<size_t>((end + kDirectAlign - 1) / kDirectAlign * kDirectAlign - start);
    const bool pooled = span <= kReadBufferBytes;
    IoBuffer buf = pooled ? TakeReadBuffer() : AllocateIoBuffer(span);
    // Back to the pool however this ends (slice may throw bad_alloc): a pooled buffer lost would
    // leave a slot that every later reader waits for.
    struct Back {
      const SegmentFiles* files;
      IoBuffer* buf;
      ~Back() {
        if (files != nullptr) files->ReturnReadBuffer(std::move(*buf));
      }
    } back{pooled ? this : nullptr, &buf};
    size_t got = 0;
    const bool read = PreadFully(file->direct_fd, buf.get(), span, start, /*direct=*/true, &got);
    const int err = errno;
    if (read) return slice(buf.get(), start, got);
    if (err != EINVAL) return all(Errno("read " + PathOf(segment), err));
    // EINVAL: this file system wants other alignment after all; this file reads through the page
    // cache from now on.
    file->direct_refused.store(true, std::memory_order_relaxed);
  }
  // Through the page cache: a lone unit straight into its string, a run into one buffer.
  std::string run(static_cast<size_t>(end - begin), '\0');
  size_t got = 0;
  if (!PreadFully(file->fd, reinterpret_cast<uint8_t*>(run.data()), run.size(), begin, /*direct=*/false, &got))
    return all(Errno("read " + PathOf(segment)));
  if (n == 1 && got == run.size()) {
    (*out)[idx[0]] = std::move(run);
    return;
  }
  slice(reinterpret_cast<const uint8_t*>(run.data()), begin, got);
}

IoBuffer SegmentFiles::TakeReadBuffer() const {
  {
    MutexLock l(&read_buffers_mu_);
    read_buffer_cv_.Wait(&read_buffers_mu_, [&]() DS41_REQUIRES(read_buffers_mu_) {
      return !read_buffers_.empty() || read_pool_ < kMaxReadBuffers;
    });
    if (!read_buffers_.empty()) {
      IoBuffer b = std::move(read_buffers_.back());
      read_buffers_.pop_back();
      return b;
    }
    ++read_pool_;  // counted before allocating (outside the lock), so the bound holds meanwhile
  }
  IoBuffer b;
  try {
    b = AllocateIoBuffer(kReadBufferBytes);
  } catch (...) {
    MutexLock l(&read_buffers_mu_);
    --read_pool_;
    read_buffer_cv_.NotifyOne();
    throw;
  }
  buffer_bytes_.fetch_add(kReadBufferBytes, std::memory_order_relaxed);
  return b;
}

void SegmentFiles::ReturnReadBuffer(IoBuffer buf) const {
  {
    MutexLock l(&read_buffers_mu_);
    read_buffers_.push_back(std::move(buf));
  }
  read_buffer_cv_.NotifyOne();
}

Status SegmentFiles::Seal() {
  MutexLock l(&mu_);
  if (segments_[active_].size == 0) return Status::Ok();
  return StartSegmentLocked(/*drop_previous=*/true);
}

std::vector<SegmentUsage> SegmentFiles::Usage() const {
  MutexLock l(&mu_);
  std::vector<SegmentUsage> out;
  for (const auto& [id, seg] : segments_) out.push_back({id, seg.size, seg.live, id == active_});
  return out;
}

uint64_t SegmentFiles::FileBytes() const {
  MutexLock l(&mu_);
  return file_bytes_;
}

uint64_t SegmentFiles::PeakFileBytes() const {
  MutexLock l(&mu_);
  return peak_file_bytes_;
}

bool SegmentFiles::ReadsDirect() const {
  MutexLock l(&mu_);
  const File& f = *open_->file;
  return f.direct_fd >= 0 && !f.direct_refused.load(std::memory_order_relaxed);
}

bool SegmentFiles::DirectIo() const {
  MutexLock l(&mu_);
  return open_->file->align > 1;
}

uint64_t SegmentFiles::BufferBytes() const { return buffer_bytes_.load(std::memory_order_relaxed); }

size_t SegmentFiles::FileCount() const {
  MutexLock l(&mu_);
  return segments_.size();
}

}  // namespace ds41
