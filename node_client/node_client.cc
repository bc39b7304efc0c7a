#include "node_client/node_client.h"

#include <grpcpp/grpcpp.h>

#include "node.grpc.pb.h"
#include "node_client/node_codec.h"
#include "rpc/status_map.h"

namespace ds41 {

namespace pb = ds41::node::v1;

namespace {

void SetDeadline(grpc::ClientContext* ctx, std::chrono::steady_clock::time_point deadline) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - std::chrono::steady_clock::now()));
}

// Cancels the call when the token is cancelled, for as long as the call runs.
CancelToken::Attachment CancelWith(CancelToken* cancel, grpc::ClientContext* ctx, bool* already_cancelled) {
  *already_cancelled = false;
  if (!cancel) return {};
  bool attached = true;
  CancelToken::Attachment a = cancel->OnCancel([ctx] { ctx->TryCancel(); }, &attached);
  *already_cancelled = !attached;
  return a;
}

}  // namespace

NodeClient::NodeClient(std::shared_ptr<ChannelSet> channels, std::string fingerprint)
    : channels_(std::move(channels)), fingerprint_(std::move(fingerprint)) {}

StatusOr<PrefillOutput> NodeClient::Prefill(const std::string& encoder, const PrefillInput& in,
                                            std::chrono::steady_clock::time_point deadline, CancelToken* cancel) const {
  pb::PrefillRequest req;
  EncodePrefillRequest(in, fingerprint_, &req);
  grpc::ClientContext ctx;
  SetDeadline(&ctx, deadline);
  bool cancelled = false;
  CancelToken::Attachment attachment = CancelWith(cancel, &ctx, &cancelled);
  if (cancelled) return CancelledError("prefill cancelled");
  pb::PrefillResponse resp;
  const grpc::Status s = pb::Encoder::NewStub(channels_->Get(encoder))->Prefill(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s).Prefixed("encoder " + encoder);
  return DecodePrefillResponse(&resp);
}

GenerateCallResult NodeClient::Generate(const std::string& decoder, const GenerateInput& in, CancelToken* cancel,
                                        const TokenBatchSink& sink) const {
  GenerateCallResult res;
  pb::GenerateRequest req;
  EncodeGenerateRequest(in, fingerprint_, &req);
  grpc::ClientContext ctx;
  SetDeadline(&ctx, in.deadline);
  bool cancelled = false;
  CancelToken::Attachment attachment = CancelWith(cancel, &ctx, &cancelled);
  if (cancelled) {
    res.status = CancelledError("request cancelled");
    return res;
  }
  auto reader = pb::Decoder::NewStub(channels_->Get(decoder))->Generate(&ctx, req);
  pb::GenerateResponse msg;
  ds41::Status malformed;  // NodeClient::Status, the call, hides the type here
  while (reader->Read(&msg)) {
    if (msg.tokens_size() > 0) {
      StatusOr<GeneratedTokens> got = DecodeGenerated(msg);
      if (!got.ok()) {
        malformed = InternalError(got.status().message()).Prefixed("decoder " + decoder);
        ctx.TryCancel();
        break;
      }
      if (!sink(*got)) {
        res.stopped = true;
        ctx.TryCancel();
        break;
      }
    }
    if (!msg.finish_reason().empty()) {
      res.end.finish_reason = msg.finish_reason();
      res.end.usage = DecodeUsage(msg.usage());
    }
  }
  res.status = FromGrpc(reader->Finish());
  if (!malformed.ok()) res.status = malformed;
  return res;
}

StatusOr<std::string> NodeClient::FetchSwa(const std::string& peer, const UnitKey& ns, const UnitKey& prefix_key,
                                           int64_t position, std::chrono::milliseconds timeout) const {
  pb::SwaStateRequest req;
  EncodeSwaStateRequest(ns, prefix_key, position, fingerprint_, &req);
  pb::SwaStateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  const grpc::Status s = pb::SwaState::NewStub(channels_->Get(peer))->GetSwaState(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return std::move(*resp.mutable_swa_state());
}

StatusOr<NodeStatusReport> NodeClient::Status(NodeRole role, const std::string& address,
                                              std::chrono::milliseconds timeout) const {
  pb::NodeStatus st;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  const auto channel = channels_->Get(address);
  const grpc::Status gs = role == NodeRole::kEncoder
                              ? pb::Encoder::NewStub(channel)->Status(&ctx, pb::NodeStatusRequest(), &st)
                              : pb::Decoder::NewStub(channel)->Status(&ctx, pb::NodeStatusRequest(), &st);
  if (!gs.ok()) return FromGrpc(gs);
  return DecodeNodeStatus(st);
}

}  // namespace ds41
