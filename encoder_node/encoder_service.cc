#include "encoder_node/encoder_service.h"

#include "node_client/node_codec.h"
#include "rpc/status_map.h"

namespace ds41 {

namespace pb = ds41::node::v1;

namespace {

// One Prefill call: the core answers it through a callback (no thread waits for it); OnCancel (the
// caller gone, its deadline passed, the server shutting down) cancels the core's prefill through
// the token.
class PrefillReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit PrefillReactor(std::chrono::system_clock::time_point deadline)
      : deadline_(deadline), cancel_(std::make_shared<CancelToken>()) {}
  void OnCancel() override { cancel_->Cancel(CancelReasonNow(deadline_)); }
  void OnDone() override { delete this; }
  const std::shared_ptr<CancelToken>& cancel() const { return cancel_; }

 private:
  const std::chrono::system_clock::time_point deadline_;
  std::shared_ptr<CancelToken> cancel_;
};

}  // namespace

EncoderService::EncoderService(EncoderCore* core, const std::string& fingerprint, NodeMetrics* metrics)
    : core_(core), fingerprint_(fingerprint), metrics_(metrics) {}

grpc::ServerUnaryReactor* EncoderService::Prefill(grpc::CallbackServerContext* ctx, const pb::PrefillRequest* req,
                                                  pb::PrefillResponse* resp) {
  auto* reactor = new PrefillReactor(ctx->deadline());
  // resp stays valid until Finish; the reactor until OnDone, which follows Finish.
  auto answer = [this, reactor, resp](StatusOr<PrefillOutput> out) {
    if (metrics_) metrics_->CountOutcome(out.status(), reactor->cancel()->reason());
    if (out.ok()) EncodePrefillResponse(std::move(*out), resp);
    reactor->Finish(out.ok() ? grpc::Status::OK : ToGrpc(out.status()));
  };
  PrefillInput in;
  const ds41::Status s = DecodePrefillRequest(*req, fingerprint_, &in);
  if (!s.ok()) {
    answer(s);
    return reactor;
  }
  core_->PrefillAsync(std::move(in), reactor->cancel(), std::move(answer));
  return reactor;
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
