// cache_service: the persistent global-KV store node. Thin: options -> store -> bulk data path ->
// gRPC service (which advertises the data path) -> metrics endpoint -> wait for a signal.
#include <CLI/CLI.hpp>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <thread>

#include "cache_service/data_server.h"
#include "cache_service/service.h"
#include "rpc/server.h"
#include "rpc/transport_security.h"
#include "unit/unit_format.h"
#include "util/malloc_tuning.h"
#include "util/process.h"

int main(int argc, char** argv) {
  ds41::BlockTerminationSignals();
  ds41::TuneMallocForLargeBuffers();
  CLI::App app{"ds41 cache_service: cache units on SSD (payload segment files, RocksDB index), over gRPC"};
  std::string listen = "127.0.0.1:7400", data_listen, metrics_listen = "127.0.0.1:9400", path = "./cache-data", capacity = "64G",
              segment_size = "256M", fingerprint;
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
  auto cap = ds41::ParseByteSize(capacity);
  if (!cap.ok()) {
    std::cerr << "--capacity: " << cap.status().message() << "\n";
    return 2;
  }
  auto seg = ds41::ParseByteSize(segment_size);
  if (!seg.ok() || *seg < (1u << 20)) {
    std::cerr << "--segment-size: " << (seg.ok() ? "at least 1M" : seg.status().message()) << "\n";
    return 2;
  }
  if (!fingerprint.empty() && !ds41::ParseFingerprint(fingerprint).ok()) {
    std::cerr << "--model-fingerprint must be 64 hex characters\n";
    return 2;
  }

  auto registry = std::make_shared<prometheus::Registry>();
  ds41::StoreMetrics metrics(*registry);
  ds41::StoreOptions so;
  so.path = path;
  so.capacity_bytes = *cap;
  so.ttl_seconds = static_cast<int64_t>(ttl_hours * 3600);
  so.sync_writes = sync_writes;
  so.segment_bytes = *seg;
  so.direct_io = !buffered_writes;
  auto store = ds41::UnitStore::Open(so, &metrics);
  if (!store.ok()) {
    std::cerr << store.status().ToString() << "\n";
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  ds41::CacheServiceOptions co;
  co.model_fingerprint = fingerprint;
  ds41::DataPathMetrics data_metrics(*registry);
  const ds41::RequestChecks checks(co.model_fingerprint, co.max_keys_per_request);
  const ds41::TransportSecurity security = ds41::ProcessTransportSecurity();
  std::unique_ptr<ds41::DataServer> data;
  if (data_listen != "off") {
    ds41::DataServerOptions dso;
    // Default: beside gRPC on port 7401, or any free port when gRPC's is chosen that way too.
    const bool grpc_any_port = listen.substr(listen.rfind(':') + 1) == "0";
    dso.address = data_listen.empty() ? host + (grpc_any_port ? ":0" : ":7401") : data_listen;
    auto d = ds41::DataServer::Start(dso, store->get(), &checks, &data_metrics, security);
    if (!d.ok()) {
      std::cerr << d.status().ToString() << "\n";
      return 1;
    }
    data = std::move(*d);
    co.data_port = data->port();
    co.data_tls = security.tls();
  }
  ds41::CacheService service(store->get(), &metrics, co);
  ds41::RpcServerOptions ro;
  ro.address = listen;
  auto server = ds41::StartRpcServer(ro, {&service});
  if (!server.ok()) {
    std::cerr << server.status().ToString() << "\n";
    return 1;
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(metrics_listen);
  } catch (const std::exception& e) {
    std::cerr << "cannot serve metrics on " << metrics_listen << ": " << e.what() << "\n";
    return 1;
  }
  exposer->RegisterCollectable(registry);
  const std::string dhost = data_listen.empty() || data_listen == "off" ? host : data_listen.substr(0, data_listen.rfind(':'));
  const std::string mhost = metrics_listen.substr(0, metrics_listen.rfind(':'));
  std::cout << "cache_service ready grpc=" << host << ":" << server->port << " data="
            << (data ? dhost + ":" + std::to_string(data->port()) + (security.tls() ? " data_tls=on" : "") : "off")
            << " metrics=" << mhost << ":"
            << exposer->GetListeningPorts().at(0) << " units=" << (*store)->stats().units << std::endl;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::thread sweeper([&] {
    std::unique_lock<std::mutex> l(mu);
    while (!cv.wait_for(l, std::chrono::seconds(sweep_seconds), [&] { return stopping; })) {
      auto n = (*store)->EvictExpired();
      if (!n.ok()) std::cerr << "ttl sweep: " << n.status().ToString() << "\n";
    }
  });
  const int sig = ds41::WaitForTerminationSignal();
  std::cerr << "cache_service: signal " << sig << ", shutting down\n";
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  data.reset();
  {
    std::lock_guard<std::mutex> l(mu);
    stopping = true;
  }
  cv.notify_all();
  sweeper.join();
  return 0;
}
