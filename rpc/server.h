// Builds and starts a gRPC server the way every ds41 node does: health checking and reflection on,
// bounded message sizes, port 0 allowed (the chosen port is returned), the process's transport
// security (rpc/transport_security.h).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "util/status.h"

namespace ds41 {

struct RpcServerOptions {
  std::string address = "127.0.0.1:0";
  int max_message_bytes = 64 << 20;
  int threads = 0;  // sync-server polling threads (0: gRPC's default)
};

struct RpcServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

StatusOr<RpcServer> StartRpcServer(const RpcServerOptions& options, const std::vector<grpc::Service*>& services);

}  // namespace ds41
