#include "http/http_test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "http/http_parser_include.h"

namespace ds41::testing {

struct HttpTestClient::Parser {
  http_parser p;
  http_parser_settings s;
  HttpTestResponse cur;
  std::string field, value;
  bool in_value = false;
  bool done = false;

  Parser() {
    http_parser_init(&p, HTTP_RESPONSE);
    p.data = this;
    http_parser_settings_init(&s);
    s.on_message_begin = [](http_parser* hp) {
      auto* self = static_cast<Parser*>(hp->data);
      self->cur = HttpTestResponse{};
      self->field.clear();
      self->value.clear();
      self->in_value = false;
      return 0;
    };
    s.on_header_field = [](http_parser* hp, const char* at, size_t n) {
      auto* self = static_cast<Parser*>(hp->data);
      if (self->in_value) {
        self->cur.headers.Add(std::move(self->field), std::move(self->value));
        self->field.clear();
        self->value.clear();
        self->in_value = false;
      }
      self->field.append(at, n);
      return 0;
    };
    s.on_header_value = [](http_parser* hp, const char* at, size_t n) {
      auto* self = static_cast<Parser*>(hp->data);
      self->in_value = true;
      self->value.append(at, n);
      return 0;
    };
    s.on_headers_complete = [](http_parser* hp) {
      auto* self = static_cast<Parser*>(hp->data);
      if (self->in_value) self->cur.headers.Add(std::move(self->field), std::move(self->value));
      self->in_value = false;
      self->cur.status = static_cast<int>(hp->status_code);
      // 100 Continue has no body; tell the parser so (1 = no body expected).
      return self->cur.status == 100 ? 1 : 0;
    };
    s.on_body = [](http_parser* hp, const char* at, size_t n) {
      auto* self = static_cast<Parser*>(hp->data);
      self->cur.body.append(at, n);
      if ((hp->flags & F_CHUNKED) && !self->cur.chunks.empty()) self->cur.chunks.back().append(at, n);
      return 0;
    };
    s.on_chunk_header = [](http_parser* hp) {
      auto* self = static_cast<Parser*>(hp->data);
      if (hp->content_length > 0) self->cur.chunks.emplace_back();
      return 0;
    };
    s.on_message_complete = [](http_parser* hp) {
      auto* self = static_cast<Parser*>(hp->data);
      self->done = true;
      http_parser_pause(hp, 1);
      return 0;
    };
  }
};

HttpTestClient::HttpTestClient() : parser_(std::make_unique<Parser>()) {}
HttpTestClient::~HttpTestClient() { Close(); }

bool HttpTestClient::Connect(int port, std::chrono::milliseconds timeout) {
  Close();
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return false;
  timeval tv{};
  tv.tv_sec = static_cast<long>(timeout.count() / 1000);
  tv.tv_usec = static_cast<long>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Close();
    return false;
  }
  parser_ = std::make_unique<Parser>();
  buffered_.clear();
  return true;
}

bool HttpTestClient::SendRaw(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::optional<HttpTestResponse> HttpTestClient::ReadResponse() {
  for (;;) {
    // Parse what we have first: pipelined responses may already be buffered.
    while (!buffered_.empty()) {
      size_t used = http_parser_execute(&parser_->p, &parser_->s, buffered_.data(), buffered_.size());
      buffered_.erase(0, used);
      auto err = HTTP_PARSER_ERRNO(&parser_->p);
      if (err == HPE_PAUSED) http_parser_pause(&parser_->p, 0);
      else if (err != HPE_OK) return std::nullopt;
      if (parser_->done) {
        parser_->done = false;
        if (parser_->cur.status == 100) continue;  // interim; the real response follows
        return std::move(parser_->cur);
      }
      if (used == 0) break;
    }
    char buf[16384];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      // EOF ends a body delimited by close.
      http_parser_execute(&parser_->p, &parser_->s, nullptr, 0);
      if (parser_->done) {
        parser_->done = false;
        return std::move(parser_->cur);
      }
      return std::nullopt;
    }
    if (n < 0) return std::nullopt;
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

bool HttpTestClient::PeerClosed(std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd_, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (r <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) return true;  // reset
  }
}

void HttpTestClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::optional<HttpTestResponse> HttpTestClient::Request(std::string_view method, std::string_view path,
                                                        std::string_view body, std::string_view extra_headers) {
  if (!SendRaw(FormatRequest(method, path, body, extra_headers))) return std::nullopt;
  return ReadResponse();
}

std::string FormatRequest(std::string_view method, std::string_view path, std::string_view body,
                          std::string_view extra_headers) {
  std::string r;
  r.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  if (!body.empty() || method == "POST") r.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  r.append(extra_headers);
  r.append("\r\n");
  r.append(body);
  return r;
}

}  // namespace ds41::testing
