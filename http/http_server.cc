#include "http/http_server.h"

#include <chrono>
#include <future>
#include <optional>

#include "util/asio_include.h"
#include "http/connection.h"
#include "http/server_shared.h"
#include "util/mutex.h"

namespace ds41 {
namespace http_internal {

struct IoState {
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  asio::strand<asio::io_context::executor_type> accept_strand{asio::make_strand(io)};
  asio::ip::tcp::acceptor acceptor{accept_strand};
  asio::steady_timer accept_retry{accept_strand};  // backoff after accept errors (e.g. EMFILE)
};

}  // namespace http_internal

using http_internal::Connection;

HttpServer::HttpServer(Options options, ErrorFormatter formatter)
    : shared_(std::make_shared<http_internal::ServerShared>()), io_(std::make_unique<http_internal::IoState>()) {
  shared_->options = std::move(options);
  shared_->formatter = std::make_shared<const ErrorFormatter>(formatter ? std::move(formatter)
                                                                        : ErrorFormatter(DefaultErrorFormatter));
}

HttpServer::~HttpServer() {
  Stop();
  // Queued handlers (and the connections they hold) die with the io_context, before shared_.
  io_.reset();
}

void HttpServer::Handle(std::string method, std::string path, Handler handler) {
  router_.Add(std::move(method), std::move(path), std::move(handler));
}

const HttpMetrics& HttpServer::metrics() const { return shared_->metrics; }
const ErrorFormatter& HttpServer::error_formatter() const { return *shared_->formatter; }

Status HttpServer::Start() {
  if (started_) return FailedPreconditionError("HttpServer already started");
  started_ = true;
  // The router is immutable from here on, so io threads read it without locking.
  shared_->dispatch = [this](const HttpRequest& req, std::shared_ptr<HttpResponder> r) {
    router_.Dispatch(req, r);
  };
  const auto& opt = shared_->options;
  std::error_code ec;
  auto addr = asio::ip::make_address(opt.host, ec);
  if (ec) return InvalidArgumentError("bad listen host '" + opt.host + "': " + ec.message());
  if (opt.port < 0 || opt.port > 65535) return InvalidArgumentError("bad listen port " + std::to_string(opt.port));
  asio::ip::tcp::endpoint ep(addr, static_cast<unsigned short>(opt.port));
  auto& acc = io_->acceptor;
  if (acc.open(ep.protocol(), ec); ec) return UnavailableError("open: " + ec.message());
  if (acc.set_option(asio::socket_base::reuse_address(true), ec); ec) return UnavailableError(ec.message());
  if (acc.bind(ep, ec); ec) return UnavailableError("bind " + opt.host + ":" + std::to_string(opt.port) + ": " + ec.message());
  if (acc.listen(asio::socket_base::max_listen_connections, ec); ec) return UnavailableError("listen: " + ec.message());
  port_ = acc.local_endpoint().port();

  io_->work.emplace(io_->io.get_executor());
  asio::post(io_->accept_strand, [this] { Accept(); });
  const int n = opt.io_threads > 0 ? opt.io_threads : 1;
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { io_->io.run(); });
  running_ = true;
  return Status::Ok();
}

void HttpServer::Accept() {
  io_->acceptor.async_accept(
      asio::make_strand(io_->io),
      asio::bind_executor(io_->accept_strand, [this](std::error_code ec, asio::ip::tcp::socket socket) {
        if (!io_->acceptor.is_open()) return;  // Stop() closed it
        if (ec) {
          // Typically fd exhaustion: retrying at once would spin, so back off briefly.
          io_->accept_retry.expires_after(std::chrono::milliseconds(50));
          io_->accept_retry.async_wait(asio::bind_executor(io_->accept_strand, [this](std::error_code wait_ec) {
            if (!wait_ec && io_->acceptor.is_open()) Accept();
          }));
          return;
        }
        {
          auto& m = shared_->metrics;
          m.accepted_connections.fetch_add(1);
          auto conn = std::make_shared<Connection>(std::move(socket), shared_);
          if (m.open_connections.load() >= shared_->options.max_connections) {
            m.rejected_connections.fetch_add(1);
            conn->Reject503();
          } else {
            conn->Start();
          }
        }
        Accept();
      }));
}

void HttpServer::Stop() {
  if (!running_) return;
  running_ = false;
  using Clock = std::chrono::steady_clock;

  // Close the listener on its strand, and wait for that so no new connection can slip in.
  std::promise<void> closed;
  asio::post(io_->accept_strand, [this, &closed] {
    std::error_code ec;
    io_->acceptor.close(ec);
    io_->accept_retry.cancel();
    closed.set_value();
  });
  closed.get_future().wait();

  auto snapshot = [this] {
    std::vector<std::shared_ptr<Connection>> out;
    MutexLock lock(&shared_->mu);
    for (auto& [unused, weak] : shared_->connections) {
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  };
  for (auto& c : snapshot()) c->BeginShutdown();
  auto wait_until_empty = [this](Clock::time_point deadline) {
    while (shared_->metrics.open_connections.load() > 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  wait_until_empty(Clock::now() + shared_->options.stop_grace);
  for (auto& c : snapshot()) c->ForceClose();
  wait_until_empty(Clock::now() + std::chrono::seconds(2));

  io_->work.reset();
  io_->io.stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace ds41
