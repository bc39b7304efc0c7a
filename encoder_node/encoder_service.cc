#include "encoder_node/encoder_service.h"

#include "rpc/status_map.h"
#include "serving/node_protocol.h"

namespace ds41 {
namespace {
namespace pb = ds41::node::v1;

grpc::Status Fail(NodeMetrics* m, const ds41::Status& s) {
  if (m) {
    if (s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kFailedPrecondition) m->requests_invalid.Increment();
    else if (s.code() == StatusCode::kUnavailable) m->requests_unavailable.Increment();
    else m->requests_error.Increment();
  }
  return ToGrpc(s);
}

// Encoders and decoders both serve GetSwaState with the same messages (on their own services).
std::unique_ptr<pb::Decoder::Stub> DecoderStub(ChannelSet* ch, const std::string& a) { return pb::Decoder::NewStub(ch->Get(a)); }
}  // namespace

EncoderService::EncoderService(EncoderCore* core, const std::string& fingerprint, NodeMetrics* metrics)
    : core_(core), fingerprint_(fingerprint), metrics_(metrics) {}

grpc::Status EncoderService::Prefill(grpc::ServerContext*, const pb::PrefillRequest* req, pb::PrefillResponse* resp) {
  if (ds41::Status s = CheckModel(req->model(), fingerprint_); !s.ok()) return Fail(metrics_, s);
  PrefillInput in;
  if (ds41::Status s = ParseNs(req->ns(), &in.ns); !s.ok()) return Fail(metrics_, s);
  if (static_cast<size_t>(req->tokens_size()) > kMaxPromptTokens)
    return Fail(metrics_, InvalidArgumentError("prompt longer than " + std::to_string(kMaxPromptTokens) + " tokens"));
  in.tokens.assign(req->tokens().begin(), req->tokens().end());
  in.cached_tokens = req->cached_tokens();
  in.swa_peer = req->swa().peer();
  in.unit_tokens = req->unit_tokens();
  auto out = core_->Prefill(in);
  if (!out.ok()) return Fail(metrics_, out.status());
  for (const BuiltUnit& b : out->units) resp->add_units(b.bytes);
  resp->set_swa_state(std::move(out->swa));
  resp->set_handoff(std::move(out->handoff));
  auto* st = resp->mutable_stats();
  st->set_computed_tokens(out->computed_tokens);
  st->set_replay_tokens(out->replay_tokens);
  st->set_swa_source(out->swa_source);
  st->set_cached_tokens(out->cached_tokens);
  if (metrics_) metrics_->requests_ok.Increment();
  return grpc::Status::OK;
}

grpc::Status EncoderService::GetSwaState(grpc::ServerContext*, const pb::SwaStateRequest* req, pb::SwaStateResponse* resp) {
  return ToGrpc(ServeSwaState(
      *req, fingerprint_, [this](const UnitKey& ns, const UnitKey& key) { return core_->GetSwa(ns, key); }, resp));
}

grpc::Status EncoderService::Status(grpc::ServerContext*, const pb::NodeStatusRequest*, pb::NodeStatus* resp) {
  resp->set_model_fingerprint(fingerprint_);
  resp->set_role("encoder");
  resp->set_running(core_->running());
  resp->set_queued_tokens(core_->queued_tokens());
  resp->set_resident_bytes(static_cast<int64_t>(core_->swa_pool_bytes()));
  return grpc::Status::OK;
}

SwaFetcher MakeGrpcSwaFetcher(std::shared_ptr<ChannelSet> channels, std::string fingerprint) {
  return [channels, fingerprint](const std::string& peer, const UnitKey& ns, const UnitKey& key,
                                 int64_t position) -> StatusOr<std::string> {
    pb::SwaStateRequest req;
    FillModel(fingerprint, req.mutable_model());
    req.mutable_ns()->set_id(KeyString(ns));
    req.set_prefix_key(KeyString(key));
    req.set_position(position);
    pb::SwaStateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = DecoderStub(channels.get(), peer)->GetSwaState(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      // The holder is an encoder (it keeps the state at its prompt's end): same call, its service.
      grpc::ClientContext ectx;
      ectx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      s = pb::Encoder::NewStub(channels->Get(peer))->GetSwaState(&ectx, req, &resp);
    }
    if (!s.ok()) return FromGrpc(s);
    return std::move(*resp.mutable_swa_state());
  };
}

StatusOr<PrefillOutput> CallEncoderPrefill(ChannelSet* channels, const std::string& fingerprint, const std::string& address,
                                           const PrefillInput& in, std::chrono::steady_clock::time_point deadline) {
  pb::PrefillRequest req;
  FillModel(fingerprint, req.mutable_model());
  req.mutable_ns()->set_id(KeyString(in.ns));
  for (int32_t t : in.tokens) req.add_tokens(t);
  req.set_cached_tokens(in.cached_tokens);
  req.mutable_swa()->set_peer(in.swa_peer);
  req.set_unit_tokens(in.unit_tokens);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - std::chrono::steady_clock::now()));
  pb::PrefillResponse resp;
  auto stub = pb::Encoder::NewStub(channels->Get(address));
  const grpc::Status s = stub->Prefill(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s).Prefixed("encoder " + address);
  PrefillOutput out;
  for (const std::string& u : resp.units()) {
    BuiltUnit b;
    b.bytes = u;
    out.units.push_back(std::move(b));
  }
  out.swa = std::move(*resp.mutable_swa_state());
  out.handoff = std::move(*resp.mutable_handoff());
  out.cached_tokens = resp.stats().cached_tokens();
  out.computed_tokens = resp.stats().computed_tokens();
  out.replay_tokens = resp.stats().replay_tokens();
  out.swa_source = resp.stats().swa_source();
  return out;
}

}  // namespace ds41
