// Internal to DataServer: one accepted data-path connection. Reads whatever bytes have arrived into
// a chunk, parses every complete frame in place and turns each into store operations run on the I/O
// pool (at most `window` started and unanswered at once: parsing and reading stop while the window
// is full), and writes their responses strictly in request order. A PUT's store call reads its unit
// from the chunk it arrived in (no copy between the socket and the store), so a stream of PUTs costs
// one read and one store call per chunk rather than per frame. A GET starts only once every earlier
// PUT of the connection is in the store (read-your-writes on a connection). All sessions together
// hold at most about DataServerOptions::max_held_bytes of chunks and answers: past it they stop
// reading into new chunks and (counting answers only) starting GETs until it frees; besides that,
// each connection may hold one 64 KiB chunk, so that it can always read its next request.
//
// DataSession is thread-hostile off its strand: all its state lives on the socket's strand (Close
// posts there; store work on the I/O pool posts its results back). DataShared is thread-safe: its
// fields are fixed before the first session starts, besides atomics and the (thread-safe) metrics.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache_data/asio_tls.h"
#include "cache_data/wire.h"
#include "cache_service/data_server.h"
#include "util/block_pool.h"
#include "util/task_group.h"

namespace ds41::data_internal {

class DataSession;

// A full read chunk: one read and one store call then take up to ~70 units of 57 KB.
inline constexpr size_t kChunkBytes = 4 << 20;

// What the server shares with its sessions; held by shared_ptr so it outlives queued handlers.
struct DataShared {
  DataServerOptions options;
  UnitStore* store = nullptr;
  const RequestChecks* checks = nullptr;
  DataPathMetrics* metrics = nullptr;
  std::unique_ptr<TaskGroup> store_ops;  // the store calls, on the node's store pool
  std::shared_ptr<asio::ssl::context> tls;  // null: plaintext

  // What all sessions hold (metrics->held_bytes: read chunks and answers), less `besides`, against
  // options.max_held_bytes: new chunks wait while it is spent.
  bool OverBudget(int64_t besides = 0) const {
    return metrics->held_bytes.Value() - static_cast<double>(besides) >= static_cast<double>(options.max_held_bytes);
  }
  // The answers alone against it: a GET waits only for these (read chunks, which may hold the
  // frames after it, must not hold it up), so the two together stay under twice the budget.
  bool AnswersOverBudget() const { return OverBudget(chunk_bytes.load(std::memory_order_relaxed)); }
  std::atomic<int64_t> chunk_bytes{0};  // of held_bytes, in read chunks
  // Full read chunks, apart from malloc's heap: in the heap, each burst of them left the arenas
  // larger and resident for good (docs/benchmarks-history.md, "Tenth soak"). Set with the options.
  std::optional<BlockPool> chunks;
  void PublishChunkPool() const {
    metrics->chunk_pool_bytes.Set(static_cast<double>(chunks->stats().mapped_bytes));
  }
  // Sessions started and not yet closed (against options.max_connections).
  std::atomic<size_t> open_sessions{0};
};

class DataSession : public std::enable_shared_from_this<DataSession> {
 public:
  DataSession(asio::ip::tcp::socket socket, std::shared_ptr<DataShared> shared);

  void Start();  // registers with the server, then Begin() on the strand
  void Close();  // thread-safe, idempotent

 private:
  // Bytes read from the socket, shared by the PUTs whose bodies lie in it; counted against the
  // memory budget while it lives.
  struct Chunk;
  // A PUT waiting for the store (its frame parsed; the unit's checks run with the store call).
  struct PutJob {
    uint32_t id = 0;
    std::shared_ptr<const Chunk> chunk;
    std::string_view body;  // in `chunk`
  };
  // One response, possibly several frames (a GET's units), in parts so payloads are never copied.
  struct Slot {
    std::function<std::vector<std::string>()> work;  // runs on the I/O pool (a GET's reads)
    std::optional<PutJob> job;                        // a PUT's (run with the PUTs queued beside it)
    std::vector<std::string> parts;
    bool done = false;
    bool fatal = false;  // the connection closes once this is written
    bool put = false;    // store work that writes (a GET after it waits for it)
    int64_t held = 0;    // budget bytes this slot holds (a GET's answer; a PUT's chunk counts itself)
  };

  template <typename F>
  void WithStream(F&& f);
  void Begin();  // on the strand: the TLS handshake (if any), then reading
  // Dispatches the complete frames already read (up to the window), then reads more if none was.
  void ReadFrames();
  // Dispatches every complete frame read so far, up to the window; whether it dispatched any (or
  // stopped reading on a framing error).
  bool ParseFrames();
  // Makes room in in_ for the next read (a new chunk, or in_ compacted); false: it must wait for
  // the budget or for its own store calls to let go of in_.
  bool MakeRoom();
  bool InOnlyHere() const;  // no store call holds in_ any more (so it can be reused or dropped)
  void StartRead();
  void OnRead(std::error_code ec, size_t n);
  void DispatchPut(const wire::Header& h, std::string_view body);
  void DispatchGet(const wire::Header& h, std::string_view body);
  void Answer(std::vector<std::string> parts, bool fatal);  // a slot answered without store work
  // Answers an ERROR with FATAL set (for request `id`, 0 when there is none) and stops reading.
  void Fatal(prometheus::Counter& reason, const Status& status, uint32_t id);
  void Pump();  // starts store work, writes finished responses in order, resumes reading
  void OnWorkDone(uint64_t seq, std::vector<std::string> parts);
  // Hands the PUT slots from next_start_ on (consecutive, up to the window) to one store call.
  void StartPutGroup(int window);
  void OnWrite(std::error_code ec, size_t n, bool fatal);
  void ArmRead(std::chrono::milliseconds d);
  void CancelRead();
  void CancelWrite();
  void Hold(int64_t n);
  // Calls `then` on the strand once the budget has room (the caller found it full). The waiters
  // run from the timer's handler, which holds the session.
  void AfterBudget(std::function<void()> then);
  void ArmBudget();
  void CloseOnStrand();

  asio::ip::tcp::socket socket_;
  std::optional<asio::ssl::stream<asio::ip::tcp::socket&>> tls_;
  asio::steady_timer read_timer_, write_timer_, budget_timer_;
  // A timer's handler acts only if its generation is still current: cancel() cannot stop a handler
  // already queued with success, which would otherwise close a connection that just made progress.
  uint64_t read_gen_ = 0, write_gen_ = 0;
  int64_t held_ = 0;  // budget bytes this session holds in GET answers and the write in flight
  int64_t write_held_ = 0;
  int puts_running_ = 0;        // PUT slots started, not finished
  int put_groups_running_ = 0;  // store calls they were handed to
  std::vector<std::function<void()>> budget_waiters_;
  std::shared_ptr<DataShared> shared_;

  // Read bytes: [in_begin_, in_end_) of in_ are not yet parsed; partial_ is the header of the
  // incomplete frame at in_begin_ once its 16 bytes are in. frame_deadline_: by when the rest of
  // the incomplete frame must have arrived (set by its first read).
  std::shared_ptr<Chunk> in_;
  std::weak_ptr<const Chunk> small_;  // the small chunk outside the budget, while anything holds it
  size_t in_begin_ = 0, in_end_ = 0;
  std::optional<wire::Header> partial_;
  std::optional<std::chrono::steady_clock::time_point> frame_deadline_;
  bool room_waiting_ = false;  // MakeRoom failed: a budget waiter is registered
  bool reading_ = false, read_stopped_ = false;
  bool peer_done_ = false;  // the peer closed its side between frames

  std::deque<Slot> slots_;  // slots_[i] has sequence number first_seq_ + i
  uint64_t first_seq_ = 0, next_start_ = 0;
  int active_ = 0;          // started (or answered) and not yet written
  bool writing_ = false;
  std::vector<std::string> wparts_;
  std::vector<asio::const_buffer> wbufs_;
  bool closed_ = false;
};

}  // namespace ds41::data_internal
