// AckLog: an audit record of the cache units the shards acknowledged to this process (the
// chaos test's "no acknowledged unit is lost", docs/chaos.md). Off unless a role is given
// --cache-ack-log FILE. One line per acknowledged unit, appended with one write(2) per Put part, so
// several processes may share a file and a SIGKILL loses at most the part being written, never one
// already acknowledged to the caller (the line is written before CacheClient::Put returns):
//
//   <namespace id hex> <model fingerprint hex> <format version> <key hex> <parent hex | -> <crc32c hex> <bytes>
//
// The CRC32C is of the unit bytes as put, so an audit (tools/ds41-cache-audit) finds a unit that is
// served changed, not only one that is missing.
//
// Thread-safe: Record may be called from any thread (write(2) on an O_APPEND descriptor).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unit/unit_key.h"
#include "util/status.h"

namespace ds41 {

struct CacheNamespace;
struct UnitPut;

class AckLog {
 public:
  // Opens (creating, appending to) `path`. Errors: what open(2) says.
  static StatusOr<std::unique_ptr<AckLog>> Open(const std::string& path);
  ~AckLog();
  AckLog(const AckLog&) = delete;
  AckLog& operator=(const AckLog&) = delete;

  // Appends a line for each units[i], i in `acked`. A failed write is reported on stderr once; the
  // audit then finds fewer acknowledged units, never more.
  void Record(const CacheNamespace& ns, const std::vector<UnitPut>& units, const std::vector<size_t>& acked);

 private:
  explicit AckLog(int fd) : fd_(fd) {}
  int fd_;
  bool warned_ = false;
};

// One line of an ack log, parsed.
struct AckedUnit {
  UnitKey ns_id{};
  std::string model_fingerprint;
  uint16_t format_version = 0;
  UnitKey key{};
  std::optional<UnitKey> parent;
  uint32_t crc32c = 0;
  uint64_t bytes = 0;
};
// InvalidArgument for a line that is not in the format above (a torn last line of a killed writer).
StatusOr<AckedUnit> ParseAckLine(std::string_view line);

}  // namespace ds41
