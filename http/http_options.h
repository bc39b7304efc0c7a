// Tuning knobs of HttpServer; every limit is enforced per connection unless stated otherwise.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace ds41 {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = ephemeral; HttpServer::port() reports the bound one
  int io_threads = 2;
  size_t max_header_bytes = 64 * 1024;       // request line + headers; beyond -> 431
  size_t max_body_bytes = 8 * 1024 * 1024;   // beyond -> 413 (before reading the body)
  size_t max_write_queue_bytes = 8 * 1024 * 1024;  // unsent stream bytes; beyond -> close + OnClose
  std::chrono::milliseconds header_timeout{10000};   // first byte -> end of headers; then 408 + close
  std::chrono::milliseconds body_timeout{60000};     // end of headers -> end of body; then 408 + close
  std::chrono::milliseconds idle_keepalive_timeout{60000};  // idle between requests; then close
  std::chrono::milliseconds stop_grace{5000};  // Stop() waits this long for in-flight responses
  int max_connections = 10000;  // open connections beyond this get 503 and are closed
};

}  // namespace ds41
