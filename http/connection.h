// Internal: one accepted TCP connection. Reads, parses requests (http/request_parser.h), dispatches
// them one at a time (pipelined requests wait their turn, so responses keep request order), and
// owns the per-connection write queue.
//
// Thread-hostile but for the calls marked thread-safe: all state lives on the connection's strand
// (strand_), and those calls only post work to it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "util/asio_include.h"
#include "http/http_responder.h"
#include "http/request_parser.h"
#include "http/server_shared.h"

namespace ds41::http_internal {

class Connection : public std::enable_shared_from_this<Connection>, private HttpParseEvents {
 public:
  Connection(asio::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared);
  ~Connection();

  void Start();      // registers with the server and starts reading
  void Reject503();  // answers 503 and closes; never registered

  // Thread-safe (posted to the strand).
  void BeginShutdown();  // close now if idle, else after the current response
  void ForceClose();     // close now; an unfinished response sees OnClose
  // Queues response bytes. `status` != 0 marks a response head (counted in metrics); `end` marks
  // the response complete; `stream_chunk` bytes are subject to the write-queue bound.
  void PostWrite(std::string bytes, int status, bool end, bool stream_chunk);

 private:
  enum class TimerKind { kNone, kIdle, kHeader, kBody, kLinger };

  // HttpParseEvents: the parser's steps arm and disarm the request timers.
  void OnRequestBegin() override;
  void OnHeadersComplete(bool send_continue) override;
  void OnRequestComplete() override;

  void DoRead();
  void OnReadable(std::error_code ec);
  void OnRead(std::error_code ec, const char* data, size_t n);
  void Feed();  // parses pending_ until a request is ready, more bytes are needed, or an error
  void Dispatch();
  void HandleWrite(std::string bytes, int status, bool end, bool stream_chunk);
  void Enqueue(std::string bytes);
  void DoWrite();
  void SendErrorAndClose(int status, std::string_view message, std::string_view code);
  void LingerClose();  // half-close, drain the client briefly so it sees our last response
  void Close();  // idempotent; an unfinished response sees OnClose
  void ArmTimer(TimerKind kind, std::chrono::milliseconds d);
  void DisarmTimer();
  void OnTimer();

  asio::ip::tcp::socket socket_;
  asio::strand<asio::any_io_executor> strand_;
  asio::steady_timer timer_;
  std::shared_ptr<ServerShared> shared_;
  std::string remote_;

  HttpRequestParser parser_;
  std::string pending_;  // received, not yet parsed
  bool reading_ = false;
  bool read_eof_ = false;
  bool keep_alive_ = true;  // for the request being answered

  // Response side.
  bool busy_ = false;  // a request was dispatched and its response is not complete
  std::shared_ptr<HttpResponder> responder_;
  std::deque<std::string> outq_;
  size_t queued_bytes_ = 0;
  std::vector<asio::const_buffer> wbufs_;
  bool writing_ = false;
  bool close_after_flush_ = false;
  bool draining_ = false;
  bool lingering_ = false;
  bool closed_ = false;
  bool registered_ = false;

  TimerKind timer_kind_ = TimerKind::kNone;
  uint64_t timer_gen_ = 0;
};

}  // namespace ds41::http_internal
