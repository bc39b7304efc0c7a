#include "http/http_responder.h"

#include <cstdio>

#include "http/connection.h"
#include "util/mutex.h"

namespace ds41 {

HttpResponder::HttpResponder(std::weak_ptr<http_internal::Connection> conn,
                             std::shared_ptr<const ErrorFormatter> formatter, bool head_request, bool keep_alive,
                             bool chunked_ok)
    : conn_(std::move(conn)),
      formatter_(std::move(formatter)),
      head_request_(head_request),
      keep_alive_(keep_alive),
      chunked_ok_(chunked_ok) {}

std::string HttpResponder::Head(int status, std::string_view content_type, const HttpHeaders& extra,
                                size_t content_length, bool streaming) const {
  std::string h;
  h.reserve(256);
  h += "HTTP/1.1 ";
  h += std::to_string(status);
  h += ' ';
  h += HttpStatusReason(status);
  h += "\r\n";
  if (!content_type.empty()) {
    h += "Content-Type: ";
    h += content_type;
    h += "\r\n";
  }
  const bool close_after = !keep_alive_ || (streaming && !chunked_ok_);
  if (streaming) {
    if (chunked_ok_) h += "Transfer-Encoding: chunked\r\n";
    h += "Cache-Control: no-cache\r\n";
  } else {
    h += "Content-Length: ";
    h += std::to_string(content_length);
    h += "\r\n";
  }
  h += close_after ? "Connection: close\r\n" : "Connection: keep-alive\r\n";
  for (const auto& [k, v] : extra.entries()) {
    // Framing headers are ours; a caller's copy would contradict them.
    if (EqualsIgnoreCase(k, "Content-Length") || EqualsIgnoreCase(k, "Transfer-Encoding") ||
        EqualsIgnoreCase(k, "Connection")) {
      continue;
    }
    h += k;
    h += ": ";
    h += v;
    h += "\r\n";
  }
  h += "\r\n";
  return h;
}

void HttpResponder::PostLocked(std::string bytes, int status, bool end, bool stream_chunk) {
  if (auto c = conn_.lock()) c->PostWrite(std::move(bytes), status, end, stream_chunk);
}

bool HttpResponder::Send(int status, std::string_view content_type, std::string body, const HttpHeaders& extra) {
  MutexLock lock(&mu_);
  if (closed_ || phase_ != Phase::kIdle) return false;
  phase_ = Phase::kDone;
  std::string out = Head(status, content_type, extra, body.size(), /*streaming=*/false);
  if (!head_request_) out += body;
  PostLocked(std::move(out), status, /*end=*/true, /*stream_chunk=*/false);
  return true;
}

bool HttpResponder::SendError(int status, std::string_view message, std::string_view type, std::string_view code,
                              const HttpHeaders& extra) {
  return Send(status, "application/json", (*formatter_)(status, message, type, code), extra);
}

bool HttpResponder::StartStream(int status, std::string_view content_type, const HttpHeaders& extra) {
  MutexLock lock(&mu_);
  if (closed_ || phase_ != Phase::kIdle) return false;
  phase_ = head_request_ ? Phase::kDone : Phase::kStreaming;
  std::string head = Head(status, content_type, extra, 0, /*streaming=*/true);
  if (head_request_ && chunked_ok_) head += "0\r\n\r\n";
  PostLocked(std::move(head), status, /*end=*/head_request_, /*stream_chunk=*/false);
  return true;
}

bool HttpResponder::Write(std::string_view chunk) {
  MutexLock lock(&mu_);
  if (closed_ || phase_ != Phase::kStreaming) return false;
  if (chunk.empty()) return true;
  std::string out;
  if (chunked_ok_) {
    char size_line[24];
    int n = std::snprintf(size_line, sizeof(size_line), "%zx\r\n", chunk.size());
    out.reserve(static_cast<size_t>(n) + chunk.size() + 2);
    out.append(size_line, static_cast<size_t>(n));
    out.append(chunk);
    out += "\r\n";
  } else {
    out.assign(chunk);
  }
  PostLocked(std::move(out), 0, /*end=*/false, /*stream_chunk=*/true);
  return true;
}

bool HttpResponder::Finish() {
  MutexLock lock(&mu_);
  if (closed_ || phase_ != Phase::kStreaming) return false;
  phase_ = Phase::kDone;
  PostLocked(chunked_ok_ ? std::string("0\r\n\r\n") : std::string(), 0, /*end=*/true, /*stream_chunk=*/false);
  return true;
}

bool HttpResponder::closed() const {
  MutexLock lock(&mu_);
  return closed_;
}

void HttpResponder::OnClose(std::function<void()> cb) {
  ReleasableMutexLock lock(&mu_);
  if (closed_) {
    lock.Release();
    if (cb) cb();
    return;
  }
  on_close_ = std::move(cb);
}

bool HttpResponder::NotifyConnectionClosed() {
  std::function<void()> cb;
  {
    MutexLock lock(&mu_);
    // A Finish()ed response whose bytes were still queued counts as delivered from the caller's
    // point of view: nothing is left for it to cancel.
    if (closed_ || phase_ == Phase::kDone) return false;
    closed_ = true;
    cb = std::move(on_close_);
  }
  if (cb) cb();
  return true;
}

}  // namespace ds41
