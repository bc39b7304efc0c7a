#include "rpc/status_map.h"

namespace ds41 {

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(s.code())), s.message());
}

Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  return Status(static_cast<StatusCode>(static_cast<int>(s.error_code())), s.error_message());
}

}  // namespace ds41
