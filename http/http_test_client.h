// Test-only blocking HTTP/1.1 client over POSIX sockets; responses are parsed with http_parser
// (HTTP_RESPONSE mode), so pipelined responses can be read one at a time.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_types.h"

namespace ds41::testing {

struct HttpTestResponse {
  int status = 0;
  HttpHeaders headers;
  std::string body;           // de-chunked
  std::vector<std::string> chunks;  // chunk payloads as they arrived (chunked responses)
};

class HttpTestClient {
 public:
  HttpTestClient();
  ~HttpTestClient();
  HttpTestClient(const HttpTestClient&) = delete;
  HttpTestClient& operator=(const HttpTestClient&) = delete;

  bool Connect(int port, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  bool SendRaw(std::string_view bytes);  // false on a send error (e.g. reset by the server)
  // Reads the next full response; nullopt on timeout, parse error or close before it completed.
  std::optional<HttpTestResponse> ReadResponse();
  bool PeerClosed(std::chrono::milliseconds wait);  // true when the server closed (EOF or reset)
  void Close();
  int fd() const { return fd_; }

  // Convenience: one request "METHOD path" with optional body on this connection.
  std::optional<HttpTestResponse> Request(std::string_view method, std::string_view path, std::string_view body = {},
                                          std::string_view extra_headers = {});

 private:
  struct Parser;
  int fd_ = -1;
  std::unique_ptr<Parser> parser_;
  std::string buffered_;  // received, not yet parsed
};

// Formats "METHOD path HTTP/1.1" with Host, Content-Length (when body non-empty) and extras
// (each "Name: value\r\n").
std::string FormatRequest(std::string_view method, std::string_view path, std::string_view body = {},
                          std::string_view extra_headers = {});

}  // namespace ds41::testing
