// EncoderService: the encoder node's gRPC face over EncoderCore: the request decoded and checked
// (node_client/node_codec.h), then the core. Prefill is a callback-API call the core answers through
// a callback (no thread waits for it), so a caller that cancels, or whose deadline passes, cancels
// the prefill at the core's next step (and a server shutting down ends what is left the same way). The node also
// registers SwaStateService over the core's pool; callers reach both through
// node_client/node_client.h. Thread-safe, as gRPC calls it: the core is.
#pragma once

#include <string>

#include "encoder_node/encoder_core.h"
#include "node.grpc.pb.h"

namespace ds41 {

class EncoderService final : public ds41::node::v1::Encoder::WithCallbackMethod_Prefill<ds41::node::v1::Encoder::Service> {
 public:
  EncoderService(EncoderCore* core, const std::string& fingerprint, NodeMetrics* metrics);
  grpc::ServerUnaryReactor* Prefill(grpc::CallbackServerContext* ctx, const ds41::node::v1::PrefillRequest* req,
                                    ds41::node::v1::PrefillResponse* resp) override;
  grpc::Status Status(grpc::ServerContext* ctx, const ds41::node::v1::NodeStatusRequest* req,
                      ds41::node::v1::NodeStatus* resp) override;

 private:
  EncoderCore* core_;
  std::string fingerprint_;
  NodeMetrics* metrics_;
};

}  // namespace ds41
