#include "rpc/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "rpc/transport_security.h"

namespace ds41 {

StatusOr<RpcServer> StartRpcServer(const RpcServerOptions& o, const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  // Linking grpc++_reflection is not enough under --as-needed (BUILD_NOTES §4 item 2): register it.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder b;
  RpcServer out;
  b.AddListeningPort(o.address, ProcessTransportSecurity().ServerCredentials(), &out.port);
  b.SetMaxReceiveMessageSize(o.max_message_bytes);
  b.SetMaxSendMessageSize(o.max_message_bytes);
  if (o.threads > 0) b.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, o.threads);
  for (grpc::Service* s : services) b.RegisterService(s);
  out.server = b.BuildAndStart();
  if (!out.server || out.port == 0) return UnavailableError("cannot listen on " + o.address);
  return out;
}

}  // namespace ds41
