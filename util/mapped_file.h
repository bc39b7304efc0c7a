// MappedFile: a read-only memory mapping of a whole file (weights are mapped, never copied).
//
// Thread-safe after construction: the mapping is immutable. The span stays valid until the object
// is destroyed or moved from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace ds41 {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` read-only. NotFound if it does not exist; an empty file maps to an empty span.
  static StatusOr<MappedFile> Open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void Reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string.
StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `data` to `path` atomically (temporary file + rename).
Status WriteStringToFile(const std::string& path, const std::string& data);

}  // namespace ds41
