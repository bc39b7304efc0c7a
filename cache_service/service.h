// CacheService: the gRPC face of the unit store. Every handler validates first (namespace, key and
// unit sizes, unit framing and checksum, model fingerprint: cache_service/grpc_requests.h over
// request_checks.h, which the bulk data path shares), then executes; anything malformed, oversized or from a foreign
// namespace is INVALID_ARGUMENT and touches nothing.
//
// Uses gRPC's synchronous API on purpose: handlers block on disk I/O, which the sync server's
// thread pool is built for (callback reactors must never block).
//
// Thread-safe: handlers run concurrently on gRPC's threads; what they share (the store, the checks,
// the I/O pool) is thread-safe or fixed after construction.
#pragma once

#include <memory>
#include <string>

#include "cache_service/request_checks.h"
#include "cache_service/store/unit_store.h"
#include "util/thread_pool.h"
#include "cache.grpc.pb.h"

namespace ds41 {

struct CacheServiceOptions {
  std::string model_fingerprint;  // accept only this model ("" = any)
  size_t max_keys_per_request = 65536;
  // Units of one Get stream read ahead while earlier ones are sent, and of one Put stream received
  // while earlier ones are written (in groups, each acknowledged only once written, in order): a
  // lone client keeps this many units in flight instead of one. The node's store pool serves all.
  int read_ahead = 32;  // (two store calls of 16)
  int write_behind = 16;
  // Advertised in Stats so clients find the bulk data path with one address per shard (0: none).
  int data_port = 0;
  bool data_tls = false;
};

class CacheService final : public ds41::cache::v1::Cache::Service {
 public:
  // Store calls run on `store_io` (shared with the data path; it outlives the service).
  CacheService(UnitStore* store, StoreMetrics* metrics, CacheServiceOptions options, ThreadPool* store_io);

  grpc::Status Put(grpc::ServerContext* ctx,
                   grpc::ServerReaderWriter<ds41::cache::v1::PutAck, ds41::cache::v1::PutRequest>* stream) override;
  grpc::Status Get(grpc::ServerContext* ctx, const ds41::cache::v1::GetRequest* req,
                   grpc::ServerWriter<ds41::cache::v1::GetResponse>* writer) override;
  grpc::Status Lookup(grpc::ServerContext* ctx, const ds41::cache::v1::LookupRequest* req,
                      ds41::cache::v1::LookupResponse* resp) override;
  grpc::Status DeleteNamespace(grpc::ServerContext* ctx, const ds41::cache::v1::DeleteNamespaceRequest* req,
                               ds41::cache::v1::DeleteNamespaceResponse* resp) override;
  grpc::Status Stats(grpc::ServerContext* ctx, const ds41::cache::v1::StatsRequest* req,
                     ds41::cache::v1::StatsResponse* resp) override;

 private:
  UnitStore* store_;
  StoreMetrics* metrics_;
  CacheServiceOptions opt_;
  RequestChecks checks_;
  ThreadPool* const io_;
};

}  // namespace ds41
