#include "http/connection.h"

#include <limits>

namespace ds41::http_internal {
namespace {

// Bytes we buffer ahead of the request being handled (pipelining); beyond it we stop reading,
// which pushes back on the client through TCP.
constexpr size_t kMaxPendingBytes = 256 * 1024;
constexpr std::chrono::milliseconds kLingerTime{1000};

Connection* Self(http_parser* p) { return static_cast<Connection*>(p->data); }

}  // namespace

Connection::Connection(asio::ip::tcp::socket socket, std::shared_ptr<ServerShared> shared)
    : socket_(std::move(socket)),
      strand_(asio::make_strand(socket_.get_executor())),
      timer_(strand_),
      shared_(std::move(shared)) {
  std::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);  // SSE chunks must not wait for Nagle
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
}

Connection::~Connection() {
  // Reached without Close() only when the io_context is torn down with our handlers queued.
  if (responder_) responder_->NotifyConnectionClosed();
}

const http_parser_settings& Connection::Settings() {
  static const http_parser_settings settings = [] {
    http_parser_settings s;
    http_parser_settings_init(&s);
    s.on_message_begin = &Connection::OnMessageBegin;
    s.on_url = &Connection::OnUrl;
    s.on_header_field = &Connection::OnHeaderField;
    s.on_header_value = &Connection::OnHeaderValue;
    s.on_headers_complete = &Connection::OnHeadersComplete;
    s.on_body = &Connection::OnBody;
    s.on_message_complete = &Connection::OnMessageComplete;
    return s;
  }();
  return settings;
}

void Connection::Start() {
  {
    std::lock_guard lock(shared_->mu);
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
  socket_.async_read_some(asio::buffer(rbuf_), asio::bind_executor(strand_, [self = shared_from_this()](
                                                                                 std::error_code ec, size_t n) {
                            self->OnRead(ec, n);
                          }));
}

void Connection::OnRead(std::error_code ec, size_t n) {
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
  pending_.append(rbuf_, n);
  Feed();
  DoRead();
}

void Connection::Feed() {
  while (!busy_ && !closed_ && !close_after_flush_ && !pending_.empty()) {
    size_t used = http_parser_execute(&parser_, &Settings(), pending_.data(), pending_.size());
    pending_.erase(0, used);
    auto err = HTTP_PARSER_ERRNO(&parser_);
    if (err == HPE_PAUSED) {
      http_parser_pause(&parser_, 0);
    } else if (err != HPE_OK) {
      if (error_status_ == 413) {
        SendErrorAndClose(413, "Request body exceeds " + std::to_string(shared_->options.max_body_bytes) + " bytes",
                          "request_too_large");
      } else if (error_status_ == 431 || err == HPE_HEADER_OVERFLOW) {
        SendErrorAndClose(431, "Request header fields too large", "headers_too_large");
      } else if (error_status_ == 417) {
        SendErrorAndClose(417, "Unsupported Expect header", "expectation_failed");
      } else if (error_status_ == 505) {
        SendErrorAndClose(505, "Only HTTP/1.0 and HTTP/1.1 are served", "http_version_not_supported");
      } else {
        SendErrorAndClose(400, std::string("Malformed HTTP request: ") + http_errno_description(err),
                          "bad_request");
      }
      return;
    }
    if (request_ready_) {
      request_ready_ = false;
      Dispatch();
    } else if (used == 0) {
      break;  // defensive: no progress
    }
  }
}

bool Connection::AddHeaderBytes(size_t n) {
  header_bytes_ += n;
  if (header_bytes_ > shared_->options.max_header_bytes) {
    error_status_ = 431;
    return false;
  }
  return true;
}

int Connection::OnMessageBegin(http_parser* p) {
  Connection* c = Self(p);
  c->cur_ = HttpRequest{};
  c->url_.clear();
  c->raw_headers_.clear();
  c->in_field_ = false;
  c->header_bytes_ = 0;
  c->error_status_ = 0;
  c->in_request_ = true;
  c->ArmTimer(TimerKind::kHeader, c->shared_->options.header_timeout);
  return 0;
}

int Connection::OnUrl(http_parser* p, const char* at, size_t n) {
  Connection* c = Self(p);
  if (!c->AddHeaderBytes(n)) return 1;
  c->url_.append(at, n);
  return 0;
}

int Connection::OnHeaderField(http_parser* p, const char* at, size_t n) {
  Connection* c = Self(p);
  if (!c->AddHeaderBytes(n)) return 1;
  if (!c->in_field_) {
    c->raw_headers_.emplace_back();
    c->in_field_ = true;
  }
  c->raw_headers_.back().first.append(at, n);
  return 0;
}

int Connection::OnHeaderValue(http_parser* p, const char* at, size_t n) {
  Connection* c = Self(p);
  if (!c->AddHeaderBytes(n)) return 1;
  c->in_field_ = false;
  if (c->raw_headers_.empty()) return 1;  // value without a field cannot happen; refuse anyway
  c->raw_headers_.back().second.append(at, n);
  return 0;
}

int Connection::OnHeadersComplete(http_parser* p) {
  Connection* c = Self(p);
  // http_parser accepts any one-digit version; answering HTTP/9.9 as if it were 1.1 would be a lie.
  if (p->http_major != 1 || p->http_minor > 1) {
    c->error_status_ = 505;
    return -1;
  }
  HttpRequest& r = c->cur_;
  r.method = http_method_str(static_cast<http_method>(p->method));
  r.http_major = p->http_major;
  r.http_minor = p->http_minor;
  r.remote_address = c->remote_;
  for (auto& [k, v] : c->raw_headers_) r.headers.Add(std::move(k), std::move(v));
  c->raw_headers_.clear();
  // Origin-form "/path?query#frag"; absolute-form targets are split by http_parser's URL parser.
  std::string_view url = c->url_;
  if (!url.empty() && url.front() != '/' && url != "*") {
    http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(c->url_.data(), c->url_.size(), 0, &u) == 0 && (u.field_set & (1 << UF_PATH))) {
      url = std::string_view(c->url_).substr(u.field_data[UF_PATH].off);
    }
  }
  if (auto h = url.find('#'); h != std::string_view::npos) url = url.substr(0, h);
  if (auto q = url.find('?'); q != std::string_view::npos) {
    r.query = std::string(url.substr(q + 1));
    url = url.substr(0, q);
  }
  r.path = std::string(url);

  const bool chunked = (p->flags & F_CHUNKED) != 0;
  const bool has_length = p->content_length != std::numeric_limits<uint64_t>::max();
  if (!chunked && has_length && p->content_length > c->shared_->options.max_body_bytes) {
    c->error_status_ = 413;
    return -1;
  }
  if (auto expect = r.headers.Get("Expect")) {
    if (!EqualsIgnoreCase(*expect, "100-continue")) {
      c->error_status_ = 417;
      return -1;
    }
    // Only 1.1 clients wait for it, and only when a body follows.
    if (p->http_major == 1 && p->http_minor >= 1 && (chunked || (has_length && p->content_length > 0))) {
      c->Enqueue("HTTP/1.1 100 Continue\r\n\r\n");
      c->shared_->metrics.CountResponse(100);
      c->DoWrite();
    }
  }
  c->keep_alive_ = http_should_keep_alive(p) != 0;
  c->ArmTimer(TimerKind::kBody, c->shared_->options.body_timeout);
  return 0;
}

int Connection::OnBody(http_parser* p, const char* at, size_t n) {
  Connection* c = Self(p);
  if (c->cur_.body.size() + n > c->shared_->options.max_body_bytes) {
    c->error_status_ = 413;
    return 1;
  }
  c->cur_.body.append(at, n);
  return 0;
}

int Connection::OnMessageComplete(http_parser* p) {
  Connection* c = Self(p);
  c->in_request_ = false;
  c->request_ready_ = true;
  if (p->upgrade) c->keep_alive_ = false;  // we speak no other protocol; end after the answer
  c->DisarmTimer();
  // Stop here so the next pipelined request is parsed only after this one is answered.
  http_parser_pause(p, 1);
  return 0;
}

void Connection::Dispatch() {
  busy_ = true;
  const bool head = cur_.method == "HEAD";
  const bool chunked_ok = cur_.http_major > 1 || (cur_.http_major == 1 && cur_.http_minor >= 1);
  // HTTP/1.0 streams are delimited by close, so 1.0 connections never persist (keeps it simple).
  if (!chunked_ok) keep_alive_ = false;
  responder_ = std::make_shared<HttpResponder>(weak_from_this(), shared_->formatter, head,
                                               keep_alive_ && !draining_, chunked_ok);
  HttpRequest req = std::move(cur_);
  cur_ = HttpRequest{};
  auto responder = responder_;  // the handler may finish synchronously and reset responder_ later
  try {
    shared_->dispatch(req, responder);
  } catch (const std::exception& e) {
    responder->SendError(500, std::string("Internal error: ") + e.what(), "server_error");
  } catch (...) {
    responder->SendError(500, "Internal error", "server_error");
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
  if (!busy_ && !in_request_) ArmTimer(TimerKind::kIdle, shared_->options.idle_keepalive_timeout);
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
      (*shared_->formatter)(status, message, status >= 500 ? "server_error" : "invalid_request_error", code);
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(HttpStatusReason(status)) +
                    "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n\r\n" + body;
  shared_->metrics.CountResponse(status);
  in_request_ = false;
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
      std::lock_guard lock(shared_->mu);
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
