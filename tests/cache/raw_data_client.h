// A deliberately low-level client of the cache's bulk data path for tests: plain POSIX sockets that
// send arbitrary bytes (valid frames or garbage) and read back whatever frames arrive.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "cache_data/wire.h"

namespace ds41::testing {

struct RawFrame {
  wire::Header header;
  std::string body;
};

class RawDataClient {
 public:
  explicit RawDataClient(const std::string& host_port);  // connects; see connected()
  ~RawDataClient();
  RawDataClient(const RawDataClient&) = delete;
  RawDataClient& operator=(const RawDataClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool Send(std::string_view bytes);  // false once the peer is gone (no SIGPIPE)
  // The next well-formed response frame; nullopt on end of stream, an error or `timeout`.
  std::optional<RawFrame> Read(std::chrono::milliseconds timeout);
  // True when the peer closes the connection within `timeout` (frames before that are skipped).
  bool ClosedByPeer(std::chrono::milliseconds timeout);
  void HalfClose();  // no more bytes from us

 private:
  bool ReadExactly(char* out, size_t n, std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  bool eof_ = false;
};

}  // namespace ds41::testing
