// DecoderService: the decoder node's gRPC face over DecoderCore. Generate streams tokens as the batch
// loop produces them; a client that cancels frees its sequence at the next step.
#pragma once

#include "decoder_node/decoder_core.h"
#include "node.grpc.pb.h"

namespace ds41 {

class DecoderService final : public ds41::node::v1::Decoder::Service {
 public:
  DecoderService(DecoderCore* core, const std::string& fingerprint, NodeMetrics* metrics);
  grpc::Status Generate(grpc::ServerContext* ctx, const ds41::node::v1::GenerateRequest* req,
                        grpc::ServerWriter<ds41::node::v1::GenerateResponse>* writer) override;
  grpc::Status GetSwaState(grpc::ServerContext* ctx, const ds41::node::v1::SwaStateRequest* req,
                           ds41::node::v1::SwaStateResponse* resp) override;
  grpc::Status Status(grpc::ServerContext* ctx, const ds41::node::v1::NodeStatusRequest* req,
                      ds41::node::v1::NodeStatus* resp) override;

 private:
  DecoderCore* core_;
  std::string fingerprint_;
  NodeMetrics* metrics_;
};

}  // namespace ds41
