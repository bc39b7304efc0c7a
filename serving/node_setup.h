// What both node binaries share before their core: flags for the model, the cache shards, compute
// threads, transport security and the tile-major weight copy, and the set-up they drive.
#pragma once

#include <memory>
#include <string>

#include "cache_client/cache_client.h"
#include "engine/loading/model.h"
#include "rpc/transport_security.h"
#include "serving/node_executors.h"
#include "util/thread_pool.h"

namespace CLI {
class App;
}

namespace ds41 {

struct NodeFlags {
  std::string model_dir;
  std::string cache;  // shard addresses, comma separated
  std::string cache_ack_log;  // audit: units the shards acknowledged (cache_client/ack_log.h); empty: none
  int threads = 0;    // 0: all cores
  int io_threads = 8;  // --store-io-threads: blocking store calls (serving/node_executors.h)
  TlsOptions tls;
  ModelOptions model;
  int shutdown_grace_s = 20;  // SIGTERM: in-flight calls get this long, then are cancelled (each stops at its next step)
};

// --model, --cache, --cache-ack-log, --threads, --store-io-threads, the TLS flags, --weight-tiles/--weight-tiles-dir and
// --shutdown-grace-seconds (env DS41_*).
void AddNodeFlags(CLI::App& app, NodeFlags* flags);

// What a node binary builds before its core. The pools are the process's only ones (besides gRPC's
// and the metrics listener's threads, and one batch loop or scheduler thread per core): declared
// first, destroyed last, after the cache client and anything given executors().
struct NodeSetup {
  std::unique_ptr<ThreadPool> compute, requests, io;
  std::unique_ptr<Model> model;
  std::unique_ptr<CacheClient> cache;  // null without shards; its shard fan-out runs on io

  NodeExecutors executors() const { return {compute.get(), requests.get(), io.get()}; }
};

// Installs transport security, builds the pools, opens the model (one stderr line on its
// tile-major weights) and connects the cache. Returns 0, or prints why and returns the exit code (2 options, 1 model).
int SetUpNode(const std::string& name, const NodeFlags& flags, NodeSetup* out);

}  // namespace ds41
