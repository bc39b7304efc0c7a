// CacheNode: one cache shard in one object, assembled as the cache_service binary runs it: the
// store, its gRPC service, the bulk data path beside it (both with the process's transport security
// and checking requests by the same options) and the periodic TTL sweep, which also reclaims dead segment
// bytes. The binary and the benchmark start
// shards through it.
//
// Thread-compatible: Start, Shutdown and the destructor come from one owning thread. The sweep
// thread shares only stopping_ and sweep_now_ (mu_ guards them) and the store, which is thread-safe;
// the store wakes it when a write burst takes its files past their bound (StoreOptions::files_over_bound).
#pragma once

#include <prometheus/registry.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cache_service/data_metrics.h"
#include "cache_service/data_server.h"
#include "cache_service/request_checks.h"
#include "cache_service/service.h"
#include "cache_service/store/store_metrics.h"
#include "cache_service/store/unit_store.h"
#include "rpc/server.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

struct CacheNodeOptions {
  StoreOptions store;
  CacheServiceOptions service;  // data_port and data_tls are filled in from the data path
  RpcServerOptions rpc;
  // The bulk data path; nullopt: none (clients use gRPC). Port 0 in its address: any free port.
  std::optional<DataServerOptions> data = DataServerOptions{};
  std::chrono::seconds sweep_interval{0};  // how often expired units are removed (0: never)
  // Threads for the store calls of the gRPC service and the data path together (they block on the
  // disk): the node's one pool besides the data path's network threads and gRPC's own.
  int store_io_threads = 32;
};

class CacheNode {
 public:
  // Opens the store and starts serving; metrics go to `registry`, which must outlive the node.
  static StatusOr<std::unique_ptr<CacheNode>> Start(CacheNodeOptions options, prometheus::Registry& registry);
  // Stops gRPC (in-flight calls get `grace`), then the data path, then the sweep.
  ~CacheNode();
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  UnitStore* store() { return store_.get(); }
  DataServer* data() { return data_.get(); }  // null without a data path
  DataPathMetrics& data_metrics() { return data_metrics_; }
  const StoreMetrics& store_metrics() const { return store_metrics_; }
  int grpc_port() const { return rpc_.port; }

 private:
  CacheNode(const CacheNodeOptions& options, prometheus::Registry& registry);
  void SweepLoop(std::chrono::seconds interval);

  StoreMetrics store_metrics_;
  DataPathMetrics data_metrics_;
  const RequestChecks checks_;
  std::unique_ptr<UnitStore> store_;
  std::unique_ptr<ThreadPool> store_io_;  // after the store, before its users: destroyed between them
  std::unique_ptr<DataServer> data_;
  std::unique_ptr<CacheService> service_;
  RpcServer rpc_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ DS41_GUARDED_BY(mu_) = false;
  bool sweep_now_ DS41_GUARDED_BY(mu_) = false;  // the store's files passed their bound
  std::thread sweeper_;
};

}  // namespace ds41
