#include "cache_service/cache_node.h"

#include <iostream>

#include "rpc/transport_security.h"
#include "util/mutex.h"

namespace ds41 {

CacheNode::CacheNode(const CacheNodeOptions& options, prometheus::Registry& registry)
    : store_metrics_(registry),
      data_metrics_(registry),
      checks_(options.service.model_fingerprint, options.service.max_keys_per_request) {}

StatusOr<std::unique_ptr<CacheNode>> CacheNode::Start(CacheNodeOptions options, prometheus::Registry& registry) {
  std::unique_ptr<CacheNode> n(new CacheNode(options, registry));
  if (options.sweep_interval.count() > 0) {
    // A write burst that outruns the sweep's timer wakes it: the disk stays near the capacity.
    options.store.files_over_bound = [p = n.get()] {
      {
        MutexLock l(&p->mu_);
        p->sweep_now_ = true;
      }
      p->cv_.NotifyOne();
    };
  }
  auto store = UnitStore::Open(options.store, &n->store_metrics_);
  if (!store.ok()) return store.status();
  n->store_ = std::move(*store);
  n->store_io_ = std::make_unique<ThreadPool>(std::max(2, options.store_io_threads), ThreadPool::Idle::kSleep, "cache-store-io");
  if (options.data) {
    const TransportSecurity security = ProcessTransportSecurity();
    auto data = DataServer::Start(*options.data, n->store_.get(), &n->checks_, &n->data_metrics_, security,
                                  n->store_io_.get());
    if (!data.ok()) return data.status();
    n->data_ = std::move(*data);
    options.service.data_port = n->data_->port();
    options.service.data_tls = security.tls();
  }
  n->service_ = std::make_unique<CacheService>(n->store_.get(), &n->store_metrics_, options.service, n->store_io_.get());
  auto rpc = StartRpcServer(options.rpc, {n->service_.get()});
  if (!rpc.ok()) return rpc.status();
  n->rpc_ = std::move(*rpc);
  if (options.sweep_interval.count() > 0)
    n->sweeper_ = std::thread([p = n.get(), interval = options.sweep_interval] { p->SweepLoop(interval); });
  return n;
}

void CacheNode::SweepLoop(std::chrono::seconds interval) {
  MutexLock l(&mu_);
  while (true) {
    cv_.WaitFor(&mu_, interval, [&]() DS41_REQUIRES(mu_) { return stopping_ || sweep_now_; });
    if (stopping_) return;
    sweep_now_ = false;
    MutexUnlock u(&mu_);
    auto n = store_->EvictExpired();
    if (!n.ok()) std::cerr << "ttl sweep: " << n.status().ToString() << "\n";
  }
}

void CacheNode::Shutdown(std::chrono::milliseconds grace) {
  if (rpc_.server) {
    rpc_.server->Shutdown(std::chrono::system_clock::now() + grace);
    rpc_.server.reset();
  }
  data_.reset();
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (sweeper_.joinable()) sweeper_.join();
}

CacheNode::~CacheNode() { Shutdown(); }

}  // namespace ds41
