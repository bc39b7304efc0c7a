// What every node binary does around its service: the metrics endpoint, the "ready" line (with the
// ports chosen, for port 0), and a clean shutdown on SIGINT/SIGTERM. Thread-compatible: one per
// process, driven by main.
#pragma once

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <vector>

#include "rpc/server.h"

namespace ds41 {

struct NodeRuntime {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;

  // Starts the gRPC server and the metrics endpoint, prints "<name> ready grpc=... metrics=... <extra>"
  // and blocks until a termination signal. Then it reports not serving on gRPC health, refuses new
  // calls, gives in-flight ones `grace_s` to finish and cancels the rest (each stops at its next
  // step). Returns the exit code.
  int Run(const std::string& name, const std::string& listen, const std::string& metrics_listen,
          const std::vector<grpc::Service*>& services, const std::string& extra, int grace_s);
};

}  // namespace ds41
