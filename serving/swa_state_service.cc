#include "serving/swa_state_service.h"

#include "node_client/node_codec.h"
#include "rpc/status_map.h"

namespace ds41 {

namespace pb = ds41::node::v1;

SwaStateService::SwaStateService(SwaPool* pool, std::string fingerprint) : pool_(pool), fingerprint_(std::move(fingerprint)) {}

grpc::Status SwaStateService::GetSwaState(grpc::ServerContext*, const pb::SwaStateRequest* req, pb::SwaStateResponse* resp) {
  UnitKey ns, key;
  if (const Status s = DecodeSwaStateRequest(*req, fingerprint_, &ns, &key); !s.ok()) return ToGrpc(s);
  std::optional<std::string> swa = pool_->Get(SwaPoolKey(ns, key));
  if (!swa) return ToGrpc(NotFoundError("no SWA state for that prefix here"));
  resp->set_swa_state(std::move(*swa));
  return grpc::Status::OK;
}

}  // namespace ds41
