#include "serving/node_runtime.h"

#include <iostream>

#include "util/cancel_token.h"
#include "util/process.h"
#include "util/process_metrics.h"

namespace ds41 {

int NodeRuntime::Run(const std::string& name, const std::string& listen, const std::string& metrics_listen,
                     const std::vector<grpc::Service*>& services, const std::string& extra, int grace_s) {
  RpcServerOptions ro;
  ro.address = listen;
  ro.max_message_bytes = 512 << 20;
  auto server = StartRpcServer(ro, services);
  if (!server.ok()) {
    std::cerr << name << ": " << server.status().ToString() << "\n";
    return 1;
  }
  auto metrics = ServeMetrics(metrics_listen, registry);
  if (!metrics.ok()) {
    std::cerr << name << ": " << metrics.status().message() << "\n";
    return 1;
  }
  exposer = std::move(*metrics);
  const std::string host = listen.substr(0, listen.rfind(':'));
  const std::string mhost = metrics_listen.substr(0, metrics_listen.rfind(':'));
  std::cout << name << " ready grpc=" << host << ":" << server->port << " metrics=" << mhost << ":"
            << exposer->GetListeningPorts().at(0) << (extra.empty() ? "" : " " + extra) << std::endl;
  const int sig = WaitForTerminationSignal();
  std::cerr << name << ": signal " << sig << ", shutting down (in-flight calls get " << grace_s << " s)\n";
  if (grpc::HealthCheckServiceInterface* health = server->server->GetHealthCheckService()) health->SetServingStatus(false);
  const auto cancel_at = std::chrono::system_clock::now() + std::chrono::seconds(grace_s);
  MarkShuttingDown(cancel_at);
  server->server->Shutdown(cancel_at);
  return 0;
}

}  // namespace ds41
