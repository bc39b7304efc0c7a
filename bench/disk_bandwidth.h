// Sequential disk bandwidth of the file system holding `dir`, measured with O_DIRECT (page cache
// bypassed) in 4 MiB blocks from an I/O buffer as the store's (util/io_buffer.h): the limit the cache
// store's throughput is reported against.
#pragma once

#include <cstdint>
#include <string>

namespace ds41 {

struct DiskBandwidth {
  double write_bytes_per_s = 0;  // including the final fdatasync
  double read_bytes_per_s = 0;
  bool direct_io = false;        // false: the file system refused O_DIRECT (figures include caching)
};

DiskBandwidth MeasureDiskBandwidth(const std::string& dir, uint64_t bytes);

// Drops the page-cache pages of every file under `dir` (posix_fadvise DONTNEED after syncfs), so
// reads that follow come from the device.
void EvictFromPageCache(const std::string& dir);

// Sum of the sizes of the regular files under `dir`.
uint64_t DirectoryBytes(const std::string& dir);

}  // namespace ds41
