#include "trace/http_stream_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

// Node's http_parser (libhttp-parser-dev), C API, behind a warning shield.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <http_parser.h>
#pragma GCC diagnostic pop

namespace ds41 {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBody = 64 * 1024;

// Milliseconds left until `deadline` for poll (0 when it has passed).
int MsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// Waits for `events` on fd; false when the deadline passed first.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = MsLeft(deadline);
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return true;  // let the following call report the error
  }
}

// One response being parsed: the callbacks' state.
struct ResponseParse {
  http_parser parser;
  http_parser_settings settings;
  HttpReply reply;
  const BodySink* sink = nullptr;
  Clock::time_point received;
  bool done = false, abandoned = false, keep_alive = false;

  explicit ResponseParse(const BodySink* s) : sink(s) {
    http_parser_init(&parser, HTTP_RESPONSE);
    parser.data = this;
    http_parser_settings_init(&settings);
    settings.on_headers_complete = [](http_parser* p) {
      static_cast<ResponseParse*>(p->data)->reply.status = static_cast<int>(p->status_code);
      return 0;
    };
    settings.on_body = [](http_parser* p, const char* at, size_t n) {
      auto* self = static_cast<ResponseParse*>(p->data);
      if (self->reply.status >= 200 && self->reply.status < 300) {
        if (!(*self->sink)(std::string_view(at, n), self->received)) {
          self->abandoned = true;
          return -1;
        }
      } else if (self->reply.body.size() < kMaxErrorBody) {
        self->reply.body.append(at, std::min(n, kMaxErrorBody - self->reply.body.size()));
      }
      return 0;
    };
    settings.on_message_complete = [](http_parser* p) {
      auto* self = static_cast<ResponseParse*>(p->data);
      self->done = true;
      self->keep_alive = http_should_keep_alive(p) != 0;
      http_parser_pause(p, 1);
      return 0;
    };
  }
};

std::string FormatRequest(const HttpUrl& url, const HttpCall& call) {
  std::string r = call.method + " " + url.prefix + call.path + " HTTP/1.1\r\nHost: " + url.host + ":" +
                  std::to_string(url.port) + "\r\n";
  if (!call.body.empty() || call.method == "POST") r += "Content-Length: " + std::to_string(call.body.size()) + "\r\n";
  for (const auto& [name, value] : call.headers) r += name + ": " + value + "\r\n";
  r += "\r\n";
  r += call.body;
  return r;
}

Status SendAll(int fd, std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      if (!WaitFor(fd, POLLOUT, deadline)) return DeadlineExceededError("the deadline passed while sending");
    } else {
      return UnavailableError(std::string("send: ") + std::strerror(errno));
    }
  }
  return Status::Ok();
}

// Sends the call on `fd` and reads its response. *got_bytes: whether any byte of a response came
// (before that, a failure on a reused connection is the server having closed it while idle).
StatusOr<HttpReply> ExchangeOn(int fd, const HttpUrl& url, const HttpCall& call, const BodySink& sink, bool* got_bytes,
                               bool* keep_alive) {
  *got_bytes = false;
  *keep_alive = false;
  DS41_RETURN_IF_ERROR(SendAll(fd, FormatRequest(url, call), call.deadline));
  ResponseParse parse(&sink);
  char buf[65536];
  while (!parse.done) {
    if (!WaitFor(fd, POLLIN, call.deadline)) return DeadlineExceededError("the deadline passed");
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n < 0) return UnavailableError(std::string("recv: ") + std::strerror(errno));
    parse.received = Clock::now();
    if (n == 0) {
      http_parser_execute(&parse.parser, &parse.settings, nullptr, 0);  // EOF ends a body delimited by close
      if (parse.done) break;
      return UnavailableError("the server closed the connection before the response ended");
    }
    *got_bytes = true;
    const size_t used = http_parser_execute(&parse.parser, &parse.settings, buf, static_cast<size_t>(n));
    if (parse.abandoned) return CancelledError("abandoned by the caller");
    const auto err = HTTP_PARSER_ERRNO(&parse.parser);
    if (err != HPE_OK && err != HPE_PAUSED) {
      return DataLossError(std::string("bad HTTP response: ") + http_errno_description(err));
    }
    // Bytes after the response on a connection we own: the server spoke out of turn; do not reuse it.
    if (parse.done && used != static_cast<size_t>(n)) parse.keep_alive = false;
  }
  *keep_alive = parse.keep_alive;
  return std::move(parse.reply);
}

}  // namespace

StatusOr<HttpUrl> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgumentError("the endpoint must be an http:// URL, not " + std::string(url));
  }
  url.remove_prefix(kScheme.size());
  HttpUrl out;
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  out.prefix = slash == std::string_view::npos ? "" : std::string(url.substr(slash));
  while (!out.prefix.empty() && out.prefix.back() == '/') out.prefix.pop_back();
  const size_t colon = authority.rfind(':');
  if (colon != std::string_view::npos) {
    const std::string port(authority.substr(colon + 1));
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) return InvalidArgumentError("bad port in " + std::string(url));
    out.port = static_cast<int>(p);
    authority = authority.substr(0, colon);
  }
  if (authority.empty()) return InvalidArgumentError("no host in the endpoint " + std::string(url));
  out.host = std::string(authority);
  return out;
}

HttpStreamClient::~HttpStreamClient() {
  MutexLock l(&mu_);
  for (int fd : idle_) ::close(fd);
}

StatusOr<int> HttpStreamClient::Connect(Clock::time_point deadline) const {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url_.port);
  if (const int rc = ::getaddrinfo(url_.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return UnavailableError("cannot resolve " + url_.host + ": " + ::gai_strerror(rc));
  }
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      if (!WaitFor(fd, POLLOUT, deadline)) {
        ::close(fd);
        ::freeaddrinfo(found);
        return DeadlineExceededError("the deadline passed while connecting to " + url_.host + ":" + port);
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return UnavailableError("cannot connect to " + url_.host + ":" + port + ": " + error);
}

int HttpStreamClient::TakeIdle() {
  MutexLock l(&mu_);
  if (idle_.empty()) return -1;
  const int fd = idle_.back();
  idle_.pop_back();
  return fd;
}

void HttpStreamClient::PutIdle(int fd) {
  MutexLock l(&mu_);
  idle_.push_back(fd);
}

StatusOr<HttpReply> HttpStreamClient::Exchange(const HttpCall& call, const BodySink& sink) {
  for (int attempt = 0;; ++attempt) {
    int fd = attempt == 0 ? TakeIdle() : -1;
    const bool reused = fd >= 0;
    if (!reused) {
      DS41_ASSIGN_OR_RETURN(fd, Connect(call.deadline));
    }
    bool got_bytes = false, keep_alive = false;
    StatusOr<HttpReply> reply = ExchangeOn(fd, url_, call, sink, &got_bytes, &keep_alive);
    if (reply.ok() && keep_alive) {
      PutIdle(fd);
    } else {
      ::close(fd);  // abandoned, failed or not keep-alive: the server sees the client leave
    }
    if (!reply.ok() && reused && !got_bytes && reply.status().code() == StatusCode::kUnavailable) continue;
    return reply;
  }
}

}  // namespace ds41
