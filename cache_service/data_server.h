// DataServer: the cache's bulk data path (docs/cache_data_path.md): unit payloads for Put and Get
// over a plain TCP stream (TLS with the process's certificates when its gRPC is TLS), in the framing
// of cache_data/wire.h, beside the gRPC control plane. Requests are checked by the same
// RequestChecks as the gRPC handlers and a PUT is acknowledged only once UnitStore::Put returned,
// so both paths give the same answers and the same durability.
//
// Every byte received is untrusted: a malformed frame gets a fatal ERROR frame and its connection
// is closed; memory per connection is bounded (its read chunks, `window` store operations and
// their responses); idle and stalled connections time out. Other connections are unaffected.
//
// Thread-safe: construction and destruction only.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "cache_service/data_metrics.h"
#include "cache_service/request_checks.h"
#include "cache_service/store/unit_store.h"
#include "rpc/transport_security.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace ds41 {

namespace data_internal {
struct DataShared;
}

struct DataServerOptions {
  std::string address = "127.0.0.1:0";  // host:port; port 0: any free port
  int net_threads = 2;                  // the Asio event loop
  int window = 64;                      // store operations in flight per connection (pipelining)
  size_t max_connections = 512;
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};  // no traffic at all: closed
  std::chrono::milliseconds io_timeout{std::chrono::seconds(30)};   // a started frame must arrive, a write drain
  // Read chunks and answers all connections may hold at once; past it they wait (without one, 512
  // peers sending 16 MiB PUTs and never reading could make the server hold ~100 GiB). Besides it,
  // each connection may hold a 64 KiB chunk; chunks and answers each stay under it.
  int64_t max_held_bytes = int64_t{512} << 20;
  // A full read chunk idle this long is unmapped (the pool keeps what recent bursts needed).
  std::chrono::milliseconds chunk_idle_release{std::chrono::seconds(10)};
};

class DataServer {
 public:
  // Listens and serves until destroyed; store operations (they block on the disk) run on `store_io`,
  // the node's store pool, which outlives the server. TLS (mutual when security.client_auth()) when
  // security.tls(). Errors: the address cannot be parsed or bound, the TLS material is unusable.
  static StatusOr<std::unique_ptr<DataServer>> Start(const DataServerOptions& options, UnitStore* store,
                                                     const RequestChecks* checks, DataPathMetrics* metrics,
                                                     const TransportSecurity& security, ThreadPool* store_io);
  // Closes every connection and waits for the store operations in flight.
  ~DataServer();

  int port() const { return port_; }

 private:
  struct Impl;
  DataServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace ds41
