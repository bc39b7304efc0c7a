// DataChannel: one client connection of the cache's bulk data path (cache_data/wire.h,
// docs/cache_data_path.md): blocking calls, each bounded by a deadline, that pipeline their
// frames (all requests written while the answers are read). TLS when given a context.
//
// Thread-compatible: one caller at a time (ShardDataPath pools them). After any transport or
// protocol failure the channel is broken() and must be dropped.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache_data/asio_tls.h"
#include "cache_data/wire.h"
#include "rpc/transport_security.h"
#include "util/status.h"

namespace ds41 {

class DataChannel {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Connects (and completes the TLS handshake, checking the server's name, when `tls` is set).
  static StatusOr<std::unique_ptr<DataChannel>> Connect(const std::string& host, int port,
                                                        const std::shared_ptr<asio::ssl::context>& tls,
                                                        const TransportSecurity& security, Deadline deadline);
  ~DataChannel();

  struct PutUnit {
    std::string_view key, parent, bytes;  // parent empty for a full unit
  };
  // Sends every PUT, then waits for each answer: (*answers)[i] is OK once unit i is committed, or
  // the server's refusal. Returns OK when every answer arrived; otherwise the transport error, the
  // channel is broken and units without an answer (nullopt) may or may not have been stored.
  Status Put(const wire::NamespaceView& ns, const std::vector<PutUnit>& units, Deadline deadline,
             std::vector<std::optional<Status>>* answers);

  // Reads `keys` (32 bytes each): (*units)[i] holds unit i when found; a miss, a unit that failed
  // its checksum on the server or a refused request leaves it empty. *answered counts the keys
  // answered, in order, before any failure. Returns OK when all were answered, else as Put.
  Status Get(const wire::NamespaceView& ns, const std::vector<std::string_view>& keys, Deadline deadline,
             std::vector<std::optional<std::string>>* units, size_t* answered);

  bool broken() const { return broken_; }
  // True when an idle channel has been closed or written to by the server (its idle timeout):
  // unusable, though nothing failed yet.
  bool Stale();

 private:
  using ReadAhead = std::array<char, 4096>;
  // Called per response frame; returns an error to stop, and sets *more = false after the last.
  // A UNIT frame's body is split: its fixed fields in `body`, its unit bytes in `*payload` (a string
  // the caller may take: what the read-ahead held of them copied, the rest read straight in); other
  // frames have all in `body`.
  using OnFrame = std::function<Status(const wire::Header&, std::string_view body, std::string* payload, bool* more)>;
  DataChannel() = default;
  // Writes `buffers` while reading responses into `on_frame` until it reports the last one, a
  // failure, or the deadline; any failure breaks the channel.
  Status Exchange(const std::vector<asio::const_buffer>& buffers, OnFrame on_frame, Deadline deadline);
  void ReadFrame();  // the next frame, from the read-ahead buffer as far as it holds it
  void Fill();       // reads what arrived (into the read-ahead buffer), then ReadFrame
  bool Deliver(const wire::Header& h);  // hands a frame over; false once the exchange ended
  void Fail(Status s);
  template <typename F>
  void WithStream(F&& f);

  asio::io_context io_;
  asio::ip::tcp::socket socket_{io_};
  std::optional<asio::ssl::stream<asio::ip::tcp::socket&>> tls_;
  // Read-ahead: one read takes in many small answers (PUT_OK, misses) at once. It holds at least a
  // whole non-UNIT frame (an ERROR: header + 4 + kMaxErrorMessage); a UNIT's bytes past it are read
  // straight into payload_, so at most this much of a unit is copied.
  ReadAhead rbuf_{};
  size_t rpos_ = 0, rend_ = 0;
  std::string body_, payload_;
  uint32_t next_id_ = 1;
  bool broken_ = false;
  // The exchange in progress.
  OnFrame on_frame_;
  bool read_done_ = false, write_done_ = false;
  Status error_;
};

}  // namespace ds41
