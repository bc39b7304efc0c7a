#include "cache_service/data_server.h"

#include <thread>
#include <vector>

#include "cache_service/data_session.h"
#include "util/mutex.h"
#include "util/process.h"
#include "util/thread_annotations.h"

namespace ds41 {

using data_internal::DataSession;
using data_internal::DataShared;

namespace {

// Accepting again at once after running out of descriptors or memory would spin until some are freed.
constexpr std::chrono::milliseconds kAcceptPause{100};

bool OutOfResources(const std::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == std::errc::too_many_files_open_in_system ||
         ec == asio::error::no_buffer_space || ec == asio::error::no_memory;
}

// Handlers still to run; Wait() returns once all have.
class Countdown {
 public:
  void Add() {
    MutexLock l(&mu_);
    ++left_;
  }
  void Done() {
    MutexLock l(&mu_);
    if (--left_ == 0) cv_.NotifyAll();  // under the lock: the waiter may destroy us once it sees 0
  }
  void Wait() {
    MutexLock l(&mu_);
    while (left_ != 0) cv_.Wait(&mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  size_t left_ DS41_GUARDED_BY(mu_) = 0;
};

}  // namespace

struct DataServer::Impl {
  using Strand = asio::strand<asio::io_context::executor_type>;

  asio::io_context io;  // declared first: destroyed last, after everything that uses it
  // The acceptor, its pause timer and `sessions` live on this strand, so closing them never races
  // an accept handler running on another network thread.
  Strand strand = asio::make_strand(io);
  asio::ip::tcp::acceptor acceptor{strand};
  asio::steady_timer accept_pause{strand};
  asio::steady_timer chunk_release{strand};  // unmaps idle read chunks while no session asks for one
  // Each session admitted and the strand it runs on, where shutdown waits for its close. Entries
  // of sessions that are gone are dropped as others arrive.
  std::vector<std::pair<std::weak_ptr<DataSession>, Strand>> sessions;
  std::shared_ptr<DataShared> shared = std::make_shared<DataShared>();
  std::vector<std::thread> threads;

  void Accept() {
    const Strand on = asio::make_strand(io);
    acceptor.async_accept(on, [this, on](std::error_code ec, asio::ip::tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (OutOfResources(ec)) {
        accept_pause.expires_after(kAcceptPause);
        accept_pause.async_wait([this](std::error_code e) {
          if (!e) Accept();
        });
        return;
      }
      if (!ec) Admit(std::move(socket), on);
      Accept();
    });
  }

  void ReleaseIdleChunks() {
    chunk_release.expires_after(shared->options.chunk_idle_release);
    chunk_release.async_wait([this](std::error_code ec) {
      if (ec) return;  // cancelled: closing
      shared->chunks->ReleaseIdle();
      shared->PublishChunkPool();
      ReleaseIdleChunks();
    });
  }

  void Admit(asio::ip::tcp::socket socket, const Strand& on) {
    if (shared->open_sessions.load(std::memory_order_relaxed) >= shared->options.max_connections) {
      shared->metrics->connections_refused.Increment();
      return;
    }
    std::erase_if(sessions, [](const auto& s) { return s.first.expired(); });
    auto session = std::make_shared<DataSession>(std::move(socket), shared);
    session->Start();
    sessions.emplace_back(session, on);
  }

  // Closes the acceptor, then every session, each on its own strand, and returns once all those
  // closes have run (a session's close keeps the connection gauge right).
  void CloseAll() {
    Countdown closing;
    closing.Add();
    asio::post(strand, [this, &closing] {
      std::error_code ignored;
      acceptor.close(ignored);  // no session is admitted after this
      accept_pause.cancel();
      chunk_release.cancel();
      for (auto& [weak, on] : sessions) {
        if (auto s = weak.lock()) {
          s->Close();
          closing.Add();
          asio::post(on, [&closing] { closing.Done(); });  // runs after the close posted before it
        }
      }
      closing.Done();
    });
    closing.Wait();
  }
};

StatusOr<std::unique_ptr<DataServer>> DataServer::Start(const DataServerOptions& o, UnitStore* store,
                                                        const RequestChecks* checks, DataPathMetrics* metrics,
                                                        const TransportSecurity& security, ThreadPool* store_io) {
  if (store_io == nullptr) return InvalidArgumentError("data path: no store pool");
  const size_t colon = o.address.rfind(':');
  if (colon == std::string::npos) return InvalidArgumentError("--data-listen: expected HOST:PORT, got " + o.address);
  std::string host = o.address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    port = std::stoi(o.address.substr(colon + 1));
  } catch (const std::exception&) {
    return InvalidArgumentError("--data-listen: bad port in " + o.address);
  }
  std::unique_ptr<DataServer> s(new DataServer());
  s->impl_ = std::make_unique<Impl>();
  Impl& im = *s->impl_;
  im.shared->options = o;
  im.shared->chunks.emplace(data_internal::kChunkBytes, o.chunk_idle_release);
  im.shared->store = store;
  im.shared->checks = checks;
  im.shared->metrics = metrics;
  if (security.tls()) {
    auto ctx = MakeServerTlsContext(security);
    if (!ctx.ok()) return ctx.status();
    im.shared->tls = *ctx;
  }
  std::error_code ec;
  asio::ip::tcp::resolver resolver(im.io);
  auto eps = resolver.resolve(host, std::to_string(port), asio::ip::tcp::resolver::passive, ec);
  if (ec || eps.empty()) return InvalidArgumentError("--data-listen: cannot resolve " + host + ": " + ec.message());
  const asio::ip::tcp::endpoint ep = *eps.begin();
  im.acceptor.open(ep.protocol(), ec);
  if (!ec) im.acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) im.acceptor.bind(ep, ec);
  if (!ec) im.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return UnavailableError("data path: cannot listen on " + o.address + ": " + ec.message());
  const asio::ip::tcp::endpoint local = im.acceptor.local_endpoint(ec);
  if (ec) return UnavailableError("data path: cannot listen on " + o.address + ": " + ec.message());
  s->port_ = local.port();
  im.shared->store_ops = std::make_unique<TaskGroup>(store_io);
  im.Accept();
  asio::post(im.strand, [&im] { im.ReleaseIdleChunks(); });
  for (int i = 0; i < std::max(1, o.net_threads); ++i)
    im.threads.emplace_back([&im] {
      NameThisThread("cache-data-net");
      im.io.run();
    });
  return s;
}

DataServer::~DataServer() {
  if (!impl_ || impl_->threads.empty()) return;  // Start failed before serving: nothing to close
  Impl& im = *impl_;
  im.CloseAll();
  im.io.stop();
  for (auto& t : im.threads) t.join();
  im.shared->store_ops->Wait();  // the store operations in flight finish; their answers go nowhere
}

}  // namespace ds41
