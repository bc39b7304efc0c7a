#include "cache_client/ack_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "cache_client/cache_client.h"
#include "util/crc32c.h"

namespace ds41 {
namespace {

bool ParseKey(const std::string& hex, UnitKey* out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    unsigned v = 0;
    for (int j = 0; j < 2; ++j) {
      const char c = hex[2 * i + static_cast<size_t>(j)];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<unsigned>(d);
    }
    (*out)[i] = static_cast<uint8_t>(v);
  }
  return true;
}

}  // namespace

StatusOr<std::unique_ptr<AckLog>> AckLog::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return InvalidArgumentError("ack log " + path + ": " + std::strerror(errno));
  return std::unique_ptr<AckLog>(new AckLog(fd));
}

AckLog::~AckLog() { ::close(fd_); }

void AckLog::Record(const CacheNamespace& ns, const std::vector<UnitPut>& units, const std::vector<size_t>& acked) {
  if (acked.empty()) return;
  std::ostringstream os;
  const std::string ns_hex = KeyHex(ns.id);
  for (size_t i : acked) {
    const UnitPut& u = units[i];
    char crc[9];
    std::snprintf(crc, sizeof crc, "%08x", Crc32c(u.bytes.data(), u.bytes.size()));
    os << ns_hex << ' ' << ns.model_fingerprint << ' ' << ns.format_version << ' ' << KeyHex(u.key) << ' '
       << (u.parent ? KeyHex(*u.parent) : std::string("-")) << ' ' << crc << ' ' << u.bytes.size() << '\n';
  }
  const std::string s = os.str();
  const ssize_t n = ::write(fd_, s.data(), s.size());
  if (n != static_cast<ssize_t>(s.size()) && !warned_) {
    warned_ = true;
    std::cerr << "cache ack log: short write (" << (n < 0 ? std::strerror(errno) : "partial") << ")\n";
  }
}

StatusOr<AckedUnit> ParseAckLine(std::string_view line) {
  std::istringstream is{std::string(line)};
  std::string ns, fp, key, parent, crc;
  unsigned format = 0;
  uint64_t bytes = 0;
  AckedUnit u;
  if (!(is >> ns >> fp >> format >> key >> parent >> crc >> bytes) || !ParseKey(ns, &u.ns_id) ||
      !ParseKey(key, &u.key) || crc.size() != 8 || fp.size() != 64 || format > 0xffff ||
      crc.find_first_not_of("0123456789abcdef") != std::string::npos)
    return InvalidArgumentError("not an ack log line: " + std::string(line.substr(0, 80)));
  if (parent != "-") {
    UnitKey p{};
    if (!ParseKey(parent, &p)) return InvalidArgumentError("bad parent key: " + parent);
    u.parent = p;
  }
  u.model_fingerprint = fp;
  u.format_version = static_cast<uint16_t>(format);
  u.crc32c = static_cast<uint32_t>(std::strtoul(crc.c_str(), nullptr, 16));
  u.bytes = bytes;
  return u;
}

}  // namespace ds41
