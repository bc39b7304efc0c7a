// HttpResponder: the handler's handle on one response. Thread-safe; may be used from any thread,
// long after the handler returned. Every call is a cheap enqueue onto the connection's strand.
// mu_ guards the phase, the closed flag and the close callback, and orders the enqueues.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "http/http_types.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

namespace http_internal {
class Connection;
}

class HttpResponder {
 public:
  // Built by the connection for each request; handlers only receive it.
  HttpResponder(std::weak_ptr<http_internal::Connection> conn, std::shared_ptr<const ErrorFormatter> formatter,
                bool head_request, bool keep_alive, bool chunked_ok);
  HttpResponder(const HttpResponder&) = delete;
  HttpResponder& operator=(const HttpResponder&) = delete;

  // Whole response with Content-Length. False when the client is gone or a response was already
  // started (the call is then a no-op).
  bool Send(int status, std::string_view content_type, std::string body, const HttpHeaders& extra = {});

  // Send() with a body from the server's ErrorFormatter (application/json).
  bool SendError(int status, std::string_view message, std::string_view type = "invalid_request_error",
                 std::string_view code = {}, const HttpHeaders& extra = {});

  // Starts a chunked response (e.g. text/event-stream); follow with Write()* and Finish().
  // HTTP/1.0 clients get an unframed body ended by closing the connection.
  bool StartStream(int status, std::string_view content_type, const HttpHeaders& extra = {});
  // Queues one chunk (empty chunks are skipped: they would end the stream). If the client reads
  // too slowly and the queue exceeds max_write_queue_bytes, the connection is closed and OnClose
  // fires; Write then returns false.
  bool Write(std::string_view chunk);
  // Ends the stream. Idempotent.
  bool Finish();

  // True once the client disconnected (or the server force-closed the connection) before the
  // response was finished; false after a normal finish.
  bool closed() const;

  // `cb` runs once if the connection dies before the response is finished: at once (on this
  // thread) when that already happened, otherwise on an io thread — so keep it short and
  // non-blocking (e.g. set a cancel flag). Replaces any earlier callback.
  void OnClose(std::function<void()> cb);

  // Called by the connection, on its strand, when it dies. Returns true when the response was
  // unfinished (so the callback fired).
  bool NotifyConnectionClosed();

 private:
  enum class Phase { kIdle, kStreaming, kDone };

  std::string Head(int status, std::string_view content_type, const HttpHeaders& extra, size_t content_length,
                   bool streaming) const;
  // Enqueues onto the connection; requires mu_ held so enqueue order equals call order.
  void PostLocked(std::string bytes, int status, bool end, bool stream_chunk) DS41_REQUIRES(mu_);

  const std::weak_ptr<http_internal::Connection> conn_;
  const std::shared_ptr<const ErrorFormatter> formatter_;
  const bool head_request_;
  const bool keep_alive_;
  const bool chunked_ok_;

  mutable Mutex mu_;
  Phase phase_ DS41_GUARDED_BY(mu_) = Phase::kIdle;
  bool closed_ DS41_GUARDED_BY(mu_) = false;
  std::function<void()> on_close_ DS41_GUARDED_BY(mu_);
};

}  // namespace ds41
