// What both node binaries share before their core: flags for the model, the cache shards, compute
// threads, transport security and the tile-major weight copy, and the set-up they drive.
#pragma once

#include <memory>
#include <string>

#include "cache_client/cache_client.h"
#include "engine/loading/model.h"
#include "rpc/transport_security.h"
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
  TlsOptions tls;
  ModelOptions model;
  int shutdown_grace_s = 20;  // SIGTERM: in-flight calls get this long, then are cancelled (each stops at its next step)
};

// --model, --cache, --cache-ack-log, --threads, the TLS flags, --weight-tiles/--weight-tiles-dir and
// --shutdown-grace-seconds (env DS41_*).
void AddNodeFlags(CLI::App& app, NodeFlags* flags);

struct NodeSetup {
  std::unique_ptr<Model> model;
  std::unique_ptr<CacheClient> cache;  // null without shards
  std::unique_ptr<ThreadPool> compute;
};

// Installs transport security, opens the model (one stderr line on its tile-major weights) and
// connects the cache. Returns 0, or prints why and returns the exit code (2 options, 1 model).
int SetUpNode(const std::string& name, const NodeFlags& flags, NodeSetup* out);

}  // namespace ds41
