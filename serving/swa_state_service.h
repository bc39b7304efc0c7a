// SwaStateService: the one gRPC service (node.proto SwaState) through which any node hands out an
// SWA state its pool holds. Encoders and decoders both register it beside their own service, so a
// peer fetches a state with one call whoever holds it (NodeClient::FetchSwa).
//
// Thread-safe (the pool is).
#pragma once

#include <string>

#include "node.grpc.pb.h"
#include "serving/swa_pool.h"

namespace ds41 {

class SwaStateService final : public ds41::node::v1::SwaState::Service {
 public:
  SwaStateService(SwaPool* pool, std::string fingerprint);
  grpc::Status GetSwaState(grpc::ServerContext* ctx, const ds41::node::v1::SwaStateRequest* req,
                           ds41::node::v1::SwaStateResponse* resp) override;

 private:
  SwaPool* pool_;
  const std::string fingerprint_;
};

}  // namespace ds41
