// HttpServer: the router's HTTP/1.1 front door. One io_context run by `io_threads` threads; each
// connection's work is serialized on its own strand (no thread per connection).
//
// Lifecycle: Handle()* -> Start() -> Stop() (or destruction). Not restartable.
//
// Thread-compatible: Handle, Start and Stop come from the owning thread (never from a handler).
// Handlers run on the io threads, which read the router only once it is fixed (at Start);
// metrics() may be read from any thread.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http/http_options.h"
#include "http/http_responder.h"
#include "http/http_types.h"
#include "http/router.h"
#include "util/status.h"

namespace ds41 {

namespace http_internal {
struct ServerShared;
struct IoState;
}  // namespace http_internal

class HttpServer {
 public:
  using Options = HttpServerOptions;
  using Handler = HttpHandler;

  explicit HttpServer(Options options, ErrorFormatter formatter = DefaultErrorFormatter);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers a route (exact path match). Call before Start().
  void Handle(std::string method, std::string path, Handler handler);
  // The routing table Handle adds to, for code that also routes without a server (the fuzz
  // harness). Add routes before Start() only.
  HttpRouter* routes() { return &router_; }

  // Binds, listens and starts the io threads. Errors: bind/listen failures, second Start().
  Status Start();

  // Graceful: stops accepting, closes idle connections, waits up to options.stop_grace for
  // in-flight responses, then force-closes the rest (their OnClose fires) and joins the threads.
  // Responders outliving Stop() are closed no-ops. Must not be called from a handler.
  void Stop();

  int port() const { return port_; }  // bound port; valid after Start()
  const HttpMetrics& metrics() const;
  const ErrorFormatter& error_formatter() const;

 private:
  void Accept();

  HttpRouter router_;
  std::shared_ptr<http_internal::ServerShared> shared_;
  std::unique_ptr<http_internal::IoState> io_;  // after shared_: torn down first
  std::vector<std::thread> threads_;
  int port_ = 0;
  bool started_ = false;
  bool running_ = false;  // threads started and not yet joined
};

}  // namespace ds41
