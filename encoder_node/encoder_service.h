// EncoderService: the encoder node's gRPC face over EncoderCore (validation, then the core), and the
// gRPC client side other roles use to reach encoders and to pull SWA states from peers.
#pragma once

#include <memory>

#include "encoder_node/encoder_core.h"
#include "node.grpc.pb.h"
#include "rpc/channels.h"

namespace ds41 {

class EncoderService final : public ds41::node::v1::Encoder::Service {
 public:
  EncoderService(EncoderCore* core, const std::string& fingerprint, NodeMetrics* metrics);
  grpc::Status Prefill(grpc::ServerContext* ctx, const ds41::node::v1::PrefillRequest* req,
                       ds41::node::v1::PrefillResponse* resp) override;
  grpc::Status GetSwaState(grpc::ServerContext* ctx, const ds41::node::v1::SwaStateRequest* req,
                           ds41::node::v1::SwaStateResponse* resp) override;
  grpc::Status Status(grpc::ServerContext* ctx, const ds41::node::v1::NodeStatusRequest* req,
                      ds41::node::v1::NodeStatus* resp) override;

 private:
  EncoderCore* core_;
  std::string fingerprint_;
  NodeMetrics* metrics_;
};

// Pulls SWA states from any node (encoder or decoder both serve GetSwaState).
SwaFetcher MakeGrpcSwaFetcher(std::shared_ptr<ChannelSet> channels, std::string fingerprint);

// Calls an encoder's Prefill.
StatusOr<PrefillOutput> CallEncoderPrefill(ChannelSet* channels, const std::string& fingerprint, const std::string& address,
                                           const PrefillInput& in, std::chrono::steady_clock::time_point deadline);

}  // namespace ds41
