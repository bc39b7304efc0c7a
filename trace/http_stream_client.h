// HttpStreamClient: a small blocking HTTP/1.1 client for load generation, over POSIX sockets with
// Node's http_parser. The response body is handed over as it arrives, with the time each piece was
// received (chunked transfer decoding included), so a caller can time streamed tokens; keep-alive
// connections are pooled and reused.
//
// Thread-safe: Exchange may be called from many threads at once, each call on its own connection.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

// "http://host:port/prefix" -> host, port (default 80) and the path prefix ("" or "/prefix", no
// trailing slash). InvalidArgument for anything else (https included).
struct HttpUrl {
  std::string host;
  int port = 80;
  std::string prefix;
};
StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

struct HttpCall {
  std::string method = "POST";
  std::string path;  // appended to the URL's prefix
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host and Content-Length
  std::chrono::steady_clock::time_point deadline;
};

// A piece of a 2xx response's decoded body and when it was received. Returning false abandons
// the call (the connection is closed).
using BodySink = std::function<bool(std::string_view bytes, std::chrono::steady_clock::time_point received)>;

struct HttpReply {
  int status = 0;
  std::string body;  // a non-2xx response's body (the first 64 KiB); a 2xx body goes to the sink
};

class HttpStreamClient {
 public:
  explicit HttpStreamClient(HttpUrl url) : url_(std::move(url)) {}
  ~HttpStreamClient();
  HttpStreamClient(const HttpStreamClient&) = delete;
  HttpStreamClient& operator=(const HttpStreamClient&) = delete;

  // Sends `call` and reads the whole response. Errors: DeadlineExceeded when the deadline passes
  // first and Cancelled when the sink returned false (both close the connection, so the server
  // sees the client leave); Unavailable when it cannot connect or the connection fails; DataLoss
  // for a response that does not parse. A pooled connection the server had closed is replaced once,
  // before any byte of the response came.
  StatusOr<HttpReply> Exchange(const HttpCall& call, const BodySink& sink);

  const HttpUrl& url() const { return url_; }

 private:
  StatusOr<int> Connect(std::chrono::steady_clock::time_point deadline) const;
  int TakeIdle() DS41_EXCLUDES(mu_);
  void PutIdle(int fd) DS41_EXCLUDES(mu_);

  const HttpUrl url_;
  Mutex mu_;
  std::vector<int> idle_ DS41_GUARDED_BY(mu_);  // keep-alive connections between calls
};

}  // namespace ds41
