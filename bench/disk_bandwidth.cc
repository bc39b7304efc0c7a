#include "bench/disk_bandwidth.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "util/io_buffer.h"

namespace ds41 {

DiskBandwidth MeasureDiskBandwidth(const std::string& dir, uint64_t bytes) {
  DiskBandwidth r;
  const std::string path = dir + "/disk-bandwidth.tmp";
  constexpr size_t kBlock = 4 << 20;
  // The buffer the store's writes come from (util/io_buffer.h): on huge pages where the kernel
  // allows them, else this would measure the device's segment limit instead of its bandwidth.
  const IoBuffer block = AllocateIoBuffer(kBlock);
  uint8_t* buf = block.get();
  std::memset(buf, 0x5A, kBlock);
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0644);
  r.direct_io = fd >= 0;
  if (fd < 0) fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) return r;
  const uint64_t blocks = std::max<uint64_t>(1, bytes / kBlock);
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < blocks; ++i)
    if (::write(fd, buf, kBlock) != static_cast<ssize_t>(kBlock)) break;
  fdatasync(fd);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.write_bytes_per_s = static_cast<double>(blocks * kBlock) / s;
  ::close(fd);
  fd = ::open(path.c_str(), r.direct_io ? (O_RDONLY | O_DIRECT) : O_RDONLY);
  if (!r.direct_io) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  t0 = std::chrono::steady_clock::now();
  uint64_t got = 0;
  ssize_t n;
  while ((n = ::read(fd, buf, kBlock)) > 0) got += static_cast<uint64_t>(n);
  s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.read_bytes_per_s = static_cast<double>(got) / s;
  ::close(fd);
  ::unlink(path.c_str());
  return r;
}

void EvictFromPageCache(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    syncfs(dfd);
    ::close(dfd);
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

uint64_t DirectoryBytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

}  // namespace ds41
