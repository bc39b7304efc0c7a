#include "cache_service/store/segment_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace ds41 {
namespace {

Status Errno(const std::string& what) { return UnavailableError("segment files: " + what + ": " + std::strerror(errno)); }

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

}  // namespace

struct SegmentFiles::File {
  int fd = -1;
  ~File() {
    if (fd >= 0) close(fd);
  }
};

SegmentFiles::~SegmentFiles() = default;

std::string SegmentFiles::PathOf(uint32_t id) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%09u.seg", id);
  return dir_ + "/" + name;
}

StatusOr<std::unique_ptr<SegmentFiles>> SegmentFiles::Open(const std::string& dir, uint64_t segment_bytes) {
  if (segment_bytes == 0) return InvalidArgumentError("segment files: segment size must be positive");
  std::unique_ptr<SegmentFiles> s(new SegmentFiles());
  s->dir_ = dir;
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
    f->fd = open(s->PathOf(*id).c_str(), O_RDWR | O_CLOEXEC);
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
  std::lock_guard<std::mutex> l(s->mu_);
  DS41_RETURN_IF_ERROR(s->StartSegmentLocked(/*drop_previous=*/false));  // (not counted yet)
  return s;
}

Status SegmentFiles::StartSegmentLocked(bool drop_previous) {
  const uint32_t id = active_ + 1;
  auto f = std::make_shared<File>();
  f->fd = open(PathOf(id).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (f->fd < 0) return Errno("create " + PathOf(id));
  // The new name must survive a power loss before anything it holds is acknowledged as synced.
  const int dfd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  const uint32_t previous = active_;
  segments_[id] = Segment{f, 0, 0, 0};
  active_ = id;
  if (drop_previous) MaybeDropLocked(previous);  // e.g. all it held was removed already
  return Status::Ok();
}

void SegmentFiles::MaybeDropLocked(uint32_t id) {
  auto it = segments_.find(id);
  if (it == segments_.end() || id == active_ || it->second.live > 0 || it->second.pending > 0) return;
  file_bytes_ -= it->second.size;
  unlink(PathOf(id).c_str());  // readers in flight keep their descriptor
  segments_.erase(it);
}

StatusOr<SegmentLocation> SegmentFiles::Append(std::string_view bytes, bool sync) {
  SegmentLocation loc;
  std::shared_ptr<File> file;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (segments_[active_].size > 0 && segments_[active_].size + bytes.size() > segment_bytes_)
      DS41_RETURN_IF_ERROR(StartSegmentLocked(/*drop_previous=*/true));
    Segment& a = segments_[active_];
    loc = {active_, a.size, static_cast<uint32_t>(bytes.size())};
    a.size += bytes.size();
    a.pending += 1;
    file_bytes_ += bytes.size();
    file = a.file;
  }
  // Written outside the lock: concurrent appends fill their own ranges of the file.
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = pwrite(file->fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(loc.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status s = Errno("write " + PathOf(loc.segment));
      Abandon(loc);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (sync && fdatasync(file->fd) != 0) {
    const Status s = Errno("sync " + PathOf(loc.segment));
    Abandon(loc);
    return s;
  }
  return loc;
}

void SegmentFiles::Commit(const SegmentLocation& loc) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = segments_.find(loc.segment);
  if (it == segments_.end()) return;
  it->second.pending -= 1;
  it->second.live += loc.size;
}

void SegmentFiles::Abandon(const SegmentLocation& loc) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = segments_.find(loc.segment);
  if (it == segments_.end()) return;
  it->second.pending -= 1;
  MaybeDropLocked(loc.segment);
}

void SegmentFiles::Release(const SegmentLocation& loc) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = segments_.find(loc.segment);
  if (it == segments_.end()) return;
  it->second.live -= std::min<uint64_t>(it->second.live, loc.size);
  MaybeDropLocked(loc.segment);
}

bool SegmentFiles::Recount(const SegmentLocation& loc) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = segments_.find(loc.segment);
  if (it == segments_.end() || loc.segment == active_ || loc.offset + loc.size > it->second.size) return false;
  it->second.live += loc.size;
  return true;
}

Status SegmentFiles::DropUnreferenced() {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<uint32_t> ids;
  for (const auto& [id, seg] : segments_) ids.push_back(id);
  for (uint32_t id : ids) MaybeDropLocked(id);
  return Status::Ok();
}

StatusOr<std::string> SegmentFiles::Read(const SegmentLocation& loc) const {
  std::shared_ptr<File> file;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = segments_.find(loc.segment);
    if (it == segments_.end()) return NotFoundError("segment files: segment gone");
    file = it->second.file;
  }
  std::string out(loc.size, '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = pread(file->fd, out.data() + done, out.size() - done, static_cast<off_t>(loc.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("read " + PathOf(loc.segment));
    if (n == 0) return DataLossError("segment files: " + PathOf(loc.segment) + " is shorter than its index says");
    done += static_cast<size_t>(n);
  }
  return out;
}

Status SegmentFiles::Seal() {
  std::lock_guard<std::mutex> l(mu_);
  if (segments_[active_].size == 0) return Status::Ok();
  return StartSegmentLocked(/*drop_previous=*/true);
}

std::vector<SegmentUsage> SegmentFiles::Usage() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<SegmentUsage> out;
  for (const auto& [id, seg] : segments_) out.push_back({id, seg.size, seg.live, id == active_});
  return out;
}

uint64_t SegmentFiles::FileBytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return file_bytes_;
}

size_t SegmentFiles::FileCount() const {
  std::lock_guard<std::mutex> l(mu_);
  return segments_.size();
}

}  // namespace ds41
