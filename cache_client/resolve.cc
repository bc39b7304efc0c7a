#include "cache_client/resolve.h"

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {
namespace {

// Never destroyed: a lookup may still be running when the process exits.
struct ResolverThread {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::thread thread{[this] { io.run(); }};
};

ResolverThread& Resolver() {
  static ResolverThread* r = new ResolverThread();
  return *r;
}

// What a lookup hands back; shared with the resolver thread, which may finish after the caller left.
struct Lookup {
  Mutex mu;
  CondVar cv;
  bool done DS41_GUARDED_BY(mu) = false;
  std::error_code ec DS41_GUARDED_BY(mu);
  std::vector<asio::ip::tcp::endpoint> endpoints DS41_GUARDED_BY(mu);
};

}  // namespace

StatusOr<std::vector<asio::ip::tcp::endpoint>> ResolveBefore(const std::string& host, int port,
                                                             std::chrono::steady_clock::time_point deadline) {
  std::error_code ec;
  const asio::ip::address numeric = asio::ip::make_address(host, ec);
  if (!ec) return std::vector<asio::ip::tcp::endpoint>{{numeric, static_cast<asio::ip::port_type>(port)}};
  auto lookup = std::make_shared<Lookup>();
  auto resolver = std::make_shared<asio::ip::tcp::resolver>(Resolver().io);
  resolver->async_resolve(host, std::to_string(port),
                          [lookup, resolver](std::error_code e, const asio::ip::tcp::resolver::results_type& results) {
                            MutexLock l(&lookup->mu);
                            lookup->ec = e;
                            for (const auto& r : results) lookup->endpoints.push_back(r.endpoint());
                            lookup->done = true;
                            lookup->cv.NotifyAll();
                          });
  MutexLock l(&lookup->mu);
  if (!lookup->cv.WaitUntil(&lookup->mu, deadline, [&]() DS41_REQUIRES(lookup->mu) { return lookup->done; }))
    return DeadlineExceededError("resolving " + host + " did not finish before the deadline");
  if (lookup->ec) return UnavailableError("cannot resolve " + host + ": " + lookup->ec.message());
  if (lookup->endpoints.empty()) return UnavailableError("cannot resolve " + host + ": no addresses");
  return std::move(lookup->endpoints);
}

}  // namespace ds41
