#include "encoder_node/encoder_service.h"

#include "node_client/node_codec.h"
#include "rpc/status_map.h"

namespace ds41 {

namespace pb = ds41::node::v1;

EncoderService::EncoderService(EncoderCore* core, const std::string& fingerprint, NodeMetrics* metrics)
    : core_(core), fingerprint_(fingerprint), metrics_(metrics) {}

grpc::Status EncoderService::Prefill(grpc::ServerContext*, const pb::PrefillRequest* req, pb::PrefillResponse* resp) {
  PrefillInput in;
  ds41::Status s = DecodePrefillRequest(*req, fingerprint_, &in);
  StatusOr<PrefillOutput> out = s.ok() ? core_->Prefill(in) : StatusOr<PrefillOutput>(s);
  if (metrics_) metrics_->CountOutcome(out.status());
  if (!out.ok()) return ToGrpc(out.status());
  EncodePrefillResponse(std::move(*out), resp);
  return grpc::Status::OK;
}

grpc::Status EncoderService::Status(grpc::ServerContext*, const pb::NodeStatusRequest*, pb::NodeStatus* resp) {
  NodeStatusReport r;
  r.fingerprint = fingerprint_;
  r.role = NodeRoleName(NodeRole::kEncoder);
  r.running = core_->running();
  r.queued_tokens = core_->queued_tokens();
  r.resident_bytes = core_->swa_pool()->bytes();
  EncodeNodeStatus(r, resp);
  return grpc::Status::OK;
}

}  // namespace ds41
