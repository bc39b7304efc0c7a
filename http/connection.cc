#include "http/connection.h"

#include "util/error_table.h"
#include "util/mutex.h"

namespace ds41::http_internal {
namespace {

// Bytes we buffer ahead of the request being handled (pipelining); beyond it we stop reading,
// which pushes back on the client through TCP.
constexpr size_t kMaxPendingBytes = 256 * 1024;
constexpr std::chrono::milliseconds kLingerTime{1000};

}  // namespace

Connection::Connection(asio::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared)
    : socket_(std::move(socket)),
      strand_(asio::make_strand(socket_.get_executor())),
      timer_(strand_),
      shared_(std::move(shared)),
      parser_(shared_->options.max_header_bytes, shared_->options.max_body_bytes, this) {
  std::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);  // SSE chunks must not wait for Nagle
  socket_.non_blocking(true, ec);  // OnReadable reads what is there, never waits
}

Connection::~Connection() {
  // Reached without Close() only when the io_context is torn down with our handlers queued.
  if (responder_) responder_->NotifyConnectionClosed();
}

void Connection::Start() {
  {
    MutexLock lock(&shared_->mu);
    shared_->connections.emplace(this, weak_from_this());
  }
  registered_ = true;
  shared_->metrics.open_connections.fetch_add(1);
  asio::dispatch(strand_, [self = shared_from_this()] {
    self->ArmTimer(TimerKind::kIdle, self->shared_->options.idle_keepalive_timeout);
    self->DoRead();
  });
}

void Connection::Reject503() {
  asio::dispatch(strand_, [self = shared_from_this()] {
    self->SendErrorAndClose(503, "Server is at its connection limit; retry later", "server_overloaded");
  });
}

void Connection::BeginShutdown() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->closed_) return;
    self->draining_ = true;
    if (!self->busy_ && !self->close_after_flush_) self->Close();
  });
}

void Connection::ForceClose() {
  asio::post(strand_, [self = shared_from_this()] { self->Close(); });
}

void Connection::PostWrite(std::string bytes, int status, bool end, bool stream_chunk) {
  asio::post(strand_, [self = shared_from_this(), b = std::move(bytes), status, end, stream_chunk]() mutable {
    self->HandleWrite(std::move(b), status, end, stream_chunk);
  });
}

// ---- Reading and parsing ----

void Connection::DoRead() {
  if (reading_ || closed_ || read_eof_) return;
  if (!lingering_ && pending_.size() >= kMaxPendingBytes) return;
  reading_ = true;
  // Waits until the socket is readable and only then reads, into the io thread's buffer: a
  // connection holds no read buffer while it waits, and an open stream waits for its whole life.
  socket_.async_wait(asio::ip::tcp::socket::wait_read,
                     asio::bind_executor(strand_, [self = shared_from_this()](std::error_code ec) { self->OnReadable(ec); }));
}

void Connection::OnReadable(std::error_code ec) {
  thread_local char buf[16 * 1024];  // used only within this call, on this thread
  size_t n = 0;
  if (!ec) n = socket_.read_some(asio::buffer(buf), ec);  // the socket is non-blocking
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    reading_ = false;  // readable was spurious: wait again
    DoRead();
    return;
  }
  OnRead(ec, buf, n);
}

void Connection::OnRead(std::error_code ec, const char* data, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    read_eof_ = true;
    if (lingering_) {
      Close();
    } else if (close_after_flush_) {
      // Our final response is still being written; the write completion closes.
    } else {
      // The client is gone; an in-flight response is cancelled through OnClose.
      Close();
    }
    return;
  }
  if (lingering_ || close_after_flush_) {  // discard: nothing more will be answered
    DoRead();
    return;
  }
  pending_.append(data, n);
  Feed();
  DoRead();
}

void Connection::Feed() {
  while (!busy_ && !closed_ && !close_after_flush_ && !pending_.empty()) {
    size_t used = 0;
    const HttpRequestParser::Result r = parser_.Parse(pending_.data(), pending_.size(), &used);
    pending_.erase(0, used);
    if (r == HttpRequestParser::Result::kError) {
      const HttpParseError& e = parser_.error();
      SendErrorAndClose(e.status, e.message, e.code);
      return;
    }
    if (r == HttpRequestParser::Result::kNeedMore) break;
    Dispatch();
  }
  // A large request's bytes are not kept for the connection's life (a stream's is long).
  if (pending_.empty() && pending_.capacity() > 4096) std::string().swap(pending_);
}

void Connection::OnRequestBegin() { ArmTimer(TimerKind::kHeader, shared_->options.header_timeout); }

void Connection::OnHeadersComplete(bool send_continue) {
  if (send_continue) {
    Enqueue("HTTP/1.1 100 Continue\r\n\r\n");
    shared_->metrics.CountResponse(100);
    DoWrite();
  }
  ArmTimer(TimerKind::kBody, shared_->options.body_timeout);
}

void Connection::OnRequestComplete() { DisarmTimer(); }

void Connection::Dispatch() {
  busy_ = true;
  HttpRequest req = parser_.TakeRequest();
  req.remote_address = remote_;
  keep_alive_ = parser_.keep_alive();
  const bool head = req.method == "HEAD";
  const bool chunked_ok = req.http_major > 1 || (req.http_major == 1 && req.http_minor >= 1);
  // HTTP/1.0 streams are delimited by close, so 1.0 connections never persist (keeps it simple).
  if (!chunked_ok) keep_alive_ = false;
  responder_ = std::make_shared<HttpResponder>(weak_from_this(), shared_->formatter, head,
                                               keep_alive_ && !draining_, chunked_ok);
  auto responder = responder_;  // the handler may finish synchronously and reset responder_ later
  try {
    shared_->dispatch(req, responder);
  } catch (const std::exception& e) {
    responder->SendError(500, std::string("Internal error: ") + e.what(), "internal_error");
  } catch (...) {
    responder->SendError(500, "Internal error", "internal_error");
  }
}

// ---- Writing ----

void Connection::HandleWrite(std::string bytes, int status, bool end, bool stream_chunk) {
  if (closed_) return;
  if (status != 0) shared_->metrics.CountResponse(status);
  if (stream_chunk && queued_bytes_ + bytes.size() > shared_->options.max_write_queue_bytes) {
    Close();  // slow reader: drop it rather than buffer without bound
    return;
  }
  if (!bytes.empty()) Enqueue(std::move(bytes));
  DoWrite();
  if (!end) return;
  busy_ = false;
  responder_.reset();
  if (!keep_alive_ || draining_) {
    close_after_flush_ = true;
    if (!writing_) LingerClose();
    return;
  }
  Feed();
  if (closed_ || close_after_flush_) return;
  if (!busy_ && !parser_.in_request()) ArmTimer(TimerKind::kIdle, shared_->options.idle_keepalive_timeout);
  DoRead();
}

void Connection::Enqueue(std::string bytes) {
  queued_bytes_ += bytes.size();
  outq_.push_back(std::move(bytes));
}

void Connection::DoWrite() {
  if (writing_ || closed_ || outq_.empty()) return;
  writing_ = true;
  wbufs_.clear();
  for (const auto& s : outq_) {
    wbufs_.push_back(asio::buffer(s));
    if (wbufs_.size() >= 64) break;
  }
  const size_t count = wbufs_.size();
  asio::async_write(socket_, wbufs_,
                    asio::bind_executor(strand_, [self = shared_from_this(), count](std::error_code ec, size_t) {
                      self->writing_ = false;
                      if (self->closed_) return;
                      if (ec) {
                        self->Close();
                        return;
                      }
                      for (size_t i = 0; i < count; ++i) {
                        self->queued_bytes_ -= self->outq_.front().size();
                        self->outq_.pop_front();
                      }
                      if (!self->outq_.empty()) {
                        self->DoWrite();
                      } else if (self->close_after_flush_) {
                        self->LingerClose();
                      }
                    }));
}

void Connection::SendErrorAndClose(int status, std::string_view message, std::string_view code) {
  std::string body =
      (*shared_->formatter)(status, message, status >= 500 ? "internal_error" : "invalid_request_error", code);
  // A condition the table expects to pass (503 at the connection limit) says when to come back.
  const ErrorMapping* m = ErrorMappingOfHttp(status);
  const std::string retry =
      m != nullptr && m->retry_after_s > 0 ? "Retry-After: " + std::to_string(m->retry_after_s) + "\r\n" : "";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(HttpStatusReason(status)) +
                    "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n" + retry + "\r\n" + body;
  shared_->metrics.CountResponse(status);
  close_after_flush_ = true;
  DisarmTimer();
  Enqueue(std::move(out));
  DoWrite();
}

void Connection::LingerClose() {
  if (closed_ || lingering_) return;
  if (read_eof_) {
    Close();
    return;
  }
  lingering_ = true;
  std::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  ArmTimer(TimerKind::kLinger, kLingerTime);
  DoRead();
}

void Connection::Close() {
  if (closed_) return;
  closed_ = true;
  DisarmTimer();
  std::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  if (auto r = std::move(responder_)) {
    if (r->NotifyConnectionClosed()) shared_->metrics.aborted_responses.fetch_add(1);
  }
  outq_.clear();
  queued_bytes_ = 0;
  if (registered_) {
    registered_ = false;
    {
      MutexLock lock(&shared_->mu);
      shared_->connections.erase(this);
    }
    shared_->metrics.open_connections.fetch_sub(1);
  }
}

// ---- Timers ----

void Connection::ArmTimer(TimerKind kind, std::chrono::milliseconds d) {
  timer_kind_ = kind;
  const uint64_t gen = ++timer_gen_;
  timer_.expires_after(d);
  timer_.async_wait(asio::bind_executor(strand_, [self = shared_from_this(), gen](std::error_code ec) {
    if (ec || gen != self->timer_gen_ || self->closed_) return;
    self->OnTimer();
  }));
}

void Connection::DisarmTimer() {
  ++timer_gen_;
  timer_kind_ = TimerKind::kNone;
  timer_.cancel();
}

void Connection::OnTimer() {
  switch (timer_kind_) {
    case TimerKind::kIdle:
    case TimerKind::kLinger:
      Close();
      break;
    case TimerKind::kHeader:
    case TimerKind::kBody:
      if (!busy_ && !close_after_flush_) SendErrorAndClose(408, "Timed out reading the request", "request_timeout");
      break;
    case TimerKind::kNone:
      break;
  }
}

}  // namespace ds41::http_internal
