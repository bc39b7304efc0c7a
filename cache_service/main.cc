// cache_service: the persistent global-KV store node. Thin: options -> CacheNode (store, bulk data
// path, gRPC service, TTL sweep) -> metrics endpoint -> wait for a signal.
#include <CLI/CLI.hpp>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <chrono>
#include <iostream>
#include <optional>

#include "cache_service/cache_node.h"
#include "rpc/transport_security.h"
#include "unit/unit_format.h"
#include "util/heap_trimmer.h"
#include "util/malloc_tuning.h"
#include "util/open_file_limit.h"
#include "util/process.h"
#include "util/process_metrics.h"

int main(int argc, char** argv) {
  ds41::BlockTerminationSignals();
  ds41::TuneMallocForLargeBuffers();
  ds41::StartHeapTrimmer();
  ds41::RaiseOpenFileLimit();
  CLI::App app{"ds41 cache_service: cache units on SSD (payload segment files, RocksDB index), over gRPC"};
  std::string listen = "127.0.0.1:7400", data_listen, metrics_listen = "127.0.0.1:9400", path = "./cache-data", capacity = "64G",
              segment_size = "256M", read_cache = "1G", index_memory = "64M", index_cache = "64M",
              data_held = "512M", fingerprint;
  double ttl_hours = 72;
  int sweep_seconds = 60;
  bool sync_writes = false, buffered_writes = false, print_config = false;
  app.add_option("--listen", listen, "gRPC address (port 0: any free port)")->envname("DS41_CACHE_LISTEN");
  app.add_option("--data-listen", data_listen,
                 "bulk data path address for unit payloads (default: the --listen host, port 7401, or 0 when "
                 "--listen's port is 0; port 0: any free port; off: none, clients use gRPC)")
      ->envname("DS41_CACHE_DATA_LISTEN");
  app.add_option("--metrics-listen", metrics_listen, "Prometheus /metrics address")->envname("DS41_CACHE_METRICS_LISTEN");
  app.add_option("--path", path, "store directory on an SSD (RocksDB index, segments/ for payloads)")->envname("DS41_CACHE_PATH");
  app.add_option("--capacity", capacity, "bytes kept before LRU eviction (K/M/G/T)")->envname("DS41_CACHE_CAPACITY");
  app.add_option("--read-cache", read_cache, "RAM for units read again (hot prefixes; K/M/G, 0: none, as suits --buffered-writes)")
      ->envname("DS41_CACHE_READ_CACHE");
  app.add_option("--index-memory", index_memory,
                 "RAM for RocksDB's memtables (index and LRU order), all column families; write-ahead logs are kept "
                 "to twice it (K/M/G, at least 4M)")
      ->envname("DS41_CACHE_INDEX_MEMORY");
  app.add_option("--index-cache", index_cache,
                 "RAM for the blocks RocksDB reads from its tables (index entries, their index and filter blocks), "
                 "one cache for all column families (K/M/G, at least 1M)")
      ->envname("DS41_CACHE_INDEX_CACHE");
  app.add_option("--data-held", data_held,
                 "RAM for the data path's read chunks and answers, all connections together; past it they wait "
                 "(K/M/G, at least 8M)")
      ->envname("DS41_CACHE_DATA_HELD");
  app.add_option("--segment-size", segment_size, "payload segment file size (K/M/G)")->envname("DS41_CACHE_SEGMENT_SIZE");
  app.add_option("--ttl-hours", ttl_hours, "units idle longer than this expire (0: never)")->envname("DS41_CACHE_TTL_HOURS");
  app.add_option("--sweep-seconds", sweep_seconds, "how often expired units are removed")->envname("DS41_CACHE_SWEEP_SECONDS")
      ->check(CLI::Range(1, 86400));
  app.add_flag("--sync-writes", sync_writes, "fsync every acknowledged write (survives power loss, not only kill -9)")
      ->envname("DS41_CACHE_SYNC_WRITES");
  app.add_flag("--buffered-writes", buffered_writes,
               "write payload segments through the page cache instead of O_DIRECT (used where the file system refuses it)")
      ->envname("DS41_CACHE_BUFFERED_WRITES");
  app.add_option("--model-fingerprint", fingerprint, "accept only this model's units")->envname("DS41_MODEL_FINGERPRINT");
  app.add_flag("--print-config", print_config, "print the effective configuration and exit");
  ds41::TlsOptions tls;
  ds41::AddTlsFlags(app, &tls);
  CLI11_PARSE(app, argc, argv);
  if (ds41::Status st = ds41::InstallTransportSecurity(tls); !st.ok()) {
    std::cerr << st.ToString() << "\n";
    return 2;
  }
  if (print_config) {
    std::cout << app.config_to_str(true, false);
    return 0;
  }
  // A byte-size flag (K/M/G/T) of at least `min_mib` MiB; nullopt (the error printed) otherwise.
  auto byte_flag = [](const char* name, const std::string& text, uint64_t min_mib) -> std::optional<uint64_t> {
    auto v = ds41::ParseByteSize(text);
    if (v.ok() && *v >= (min_mib << 20)) return *v;
    std::cerr << name << ": " << (v.ok() ? "at least " + std::to_string(min_mib) + "M" : std::string(v.status().message()))
              << "\n";
    return std::nullopt;
  };
  const auto cap = byte_flag("--capacity", capacity, 0), rc = byte_flag("--read-cache", read_cache, 0),
             im = byte_flag("--index-memory", index_memory, 4), ic = byte_flag("--index-cache", index_cache, 1),
             dh = byte_flag("--data-held", data_held, 8), seg = byte_flag("--segment-size", segment_size, 1);
  if (!cap || !rc || !im || !ic || !dh || !seg) return 2;
  if (!fingerprint.empty() && !ds41::ParseFingerprint(fingerprint).ok()) {
    std::cerr << "--model-fingerprint must be 64 hex characters\n";
    return 2;
  }

  auto registry = std::make_shared<prometheus::Registry>();
  ds41::CacheNodeOptions no;
  no.store.path = path;
  no.store.capacity_bytes = *cap;
  no.store.ttl_seconds = static_cast<int64_t>(ttl_hours * 3600);
  no.store.sync_writes = sync_writes;
  no.store.segment_bytes = *seg;
  no.store.direct_io = !buffered_writes;
  no.store.read_cache_bytes = *rc;
  no.store.index_memory_bytes = *im;
  no.store.index_cache_bytes = *ic;
  no.service.model_fingerprint = fingerprint;
  no.rpc.address = listen;
  no.sweep_interval = std::chrono::seconds(sweep_seconds);
  const std::string host = listen.substr(0, listen.rfind(':'));
  if (data_listen == "off") {
    no.data.reset();
  } else {
    // Default: beside gRPC on port 7401, or any free port when gRPC's is chosen that way too.
    const bool grpc_any_port = listen.substr(listen.rfind(':') + 1) == "0";
    no.data->address = data_listen.empty() ? host + (grpc_any_port ? ":0" : ":7401") : data_listen;
    no.data->max_held_bytes = static_cast<int64_t>(*dh);
  }
  auto node = ds41::CacheNode::Start(no, *registry);
  if (!node.ok()) {
    std::cerr << node.status().ToString() << "\n";
    return 1;
  }
  auto served = ds41::ServeMetrics(metrics_listen, registry);
  if (!served.ok()) {
    std::cerr << served.status().message() << "\n";
    return 1;
  }
  const std::unique_ptr<prometheus::Exposer> exposer = std::move(*served);
  const std::string dhost = data_listen.empty() || data_listen == "off" ? host : data_listen.substr(0, data_listen.rfind(':'));
  const std::string mhost = metrics_listen.substr(0, metrics_listen.rfind(':'));
  ds41::DataServer* data = (*node)->data();
  std::cout << "cache_service ready grpc=" << host << ":" << (*node)->grpc_port() << " data="
            << (data ? dhost + ":" + std::to_string(data->port()) + (ds41::ProcessTransportSecurity().tls() ? " data_tls=on" : "") : "off")
            << " metrics=" << mhost << ":"
            << exposer->GetListeningPorts().at(0) << " units=" << (*node)->store()->stats().units << std::endl;

  const int sig = ds41::WaitForTerminationSignal();
  std::cerr << "cache_service: signal " << sig << ", shutting down\n";
  (*node)->Shutdown(std::chrono::seconds(5));
  return 0;
}
