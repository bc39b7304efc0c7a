#include "node_client/node_client.h"

#include <grpcpp/grpcpp.h>

#include <future>
#include <optional>

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

}  // namespace

NodeClient::NodeClient(std::shared_ptr<ChannelSet> channels, std::string fingerprint)
    : channels_(std::move(channels)), fingerprint_(std::move(fingerprint)) {}

namespace {

// One Encoder.Prefill as a callback unary call; deletes itself once `done` has the outcome.
struct PrefillCallState {
  grpc::ClientContext ctx;
  std::unique_ptr<pb::Encoder::Stub> stub;
  pb::PrefillRequest req;
  pb::PrefillResponse resp;
  std::shared_ptr<CancelToken> cancel;  // kept alive while attached
  std::optional<CancelToken::Attachment> attachment;
  std::string encoder;
  std::function<void(StatusOr<PrefillOutput>)> done;
};

}  // namespace

void NodeClient::PrefillAsync(const std::string& encoder, const PrefillInput& in,
                              std::chrono::steady_clock::time_point deadline, std::shared_ptr<CancelToken> cancel,
                              std::function<void(StatusOr<PrefillOutput>)> done) const {
  if (cancel && cancel->cancelled()) return done(CancelledError("prefill cancelled"));
  auto* call = new PrefillCallState;
  EncodePrefillRequest(in, fingerprint_, &call->req);
  SetDeadline(&call->ctx, deadline);
  call->stub = pb::Encoder::NewStub(channels_->Get(encoder));
  call->encoder = encoder;
  call->done = std::move(done);
  call->cancel = std::move(cancel);
  // Attached before the call starts, so before its callback can delete the call.
  if (call->cancel) call->attachment.emplace(call->cancel->OnCancel([ctx = &call->ctx] { ctx->TryCancel(); }));
  call->stub->async()->Prefill(&call->ctx, &call->req, &call->resp, [call](grpc::Status s) {
    call->attachment.reset();  // the cancel callback never runs after this (it touches ctx)
    StatusOr<PrefillOutput> out =
        s.ok() ? DecodePrefillResponse(&call->resp) : StatusOr<PrefillOutput>(FromGrpc(s).Prefixed("encoder " + call->encoder));
    std::function<void(StatusOr<PrefillOutput>)> finished = std::move(call->done);
    delete call;
    finished(std::move(out));
  });
}

StatusOr<PrefillOutput> NodeClient::Prefill(const std::string& encoder, const PrefillInput& in,
                                            std::chrono::steady_clock::time_point deadline, CancelToken* cancel) const {
  std::promise<StatusOr<PrefillOutput>> ended;
  std::future<StatusOr<PrefillOutput>> result = ended.get_future();
  PrefillAsync(encoder, in, deadline, Borrowed(cancel),
               [&ended](StatusOr<PrefillOutput> out) { ended.set_value(std::move(out)); });
  return result.get();
}

namespace {

// One Decoder.Generate call as a client read reactor: each message is decoded and handed to the
// sink from OnReadDone, the next read started only after it (the sink's pace is the stream's), and
// the reactor deletes itself once OnDone has handed the result over.
class GenerateCall final : public grpc::ClientReadReactor<pb::GenerateResponse> {
 public:
  GenerateCall(std::string decoder, std::shared_ptr<CancelToken> cancel, TokenBatchSink sink,
               std::function<void(GenerateCallResult)> done)
      : decoder_(std::move(decoder)), cancel_(std::move(cancel)), sink_(std::move(sink)), done_(std::move(done)) {}

  void Start(const std::shared_ptr<grpc::Channel>& channel, const GenerateInput& in, const std::string& fingerprint) {
    EncodeGenerateRequest(in, fingerprint, &req_);
    SetDeadline(&ctx_, in.deadline);
    stub_ = pb::Decoder::NewStub(channel);
    stub_->async()->Generate(&ctx_, &req_, this);
    // Attached before the call starts (so before OnDone can delete this); a cancel made already
    // runs TryCancel now, which cancels the call as it starts.
    if (cancel_) attachment_.emplace(cancel_->OnCancel([this] { ctx_.TryCancel(); }));
    StartRead(&msg_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    if (msg_.tokens_size() > 0) {
      StatusOr<GeneratedTokens> got = DecodeGenerated(msg_);
      if (!got.ok()) {
        malformed_ = InternalError(got.status().message()).Prefixed("decoder " + decoder_);
        ctx_.TryCancel();
        return;
      }
      bool more = false;
      try {
        more = sink_(*got);
      } catch (const std::exception& e) {
        // On gRPC's thread nothing above would catch it: the call ends with the error instead.
        malformed_ = InternalError(std::string("internal error: ") + e.what());
        ctx_.TryCancel();
        return;
      }
      if (!more) {
        res_.stopped = true;
        ctx_.TryCancel();
        return;
      }
    }
    if (!msg_.finish_reason().empty()) {
      res_.end.finish_reason = msg_.finish_reason();
      res_.end.usage = DecodeUsage(msg_.usage());
    }
    StartRead(&msg_);
  }

  void OnDone(const grpc::Status& s) override {
    attachment_.reset();  // after this the cancel callback never runs (it touches ctx_)
    res_.status = FromGrpc(s);
    if (!malformed_.ok()) res_.status = malformed_;
    std::function<void(GenerateCallResult)> done = std::move(done_);
    GenerateCallResult res = std::move(res_);
    delete this;
    done(std::move(res));
  }

 private:
  const std::string decoder_;
  const std::shared_ptr<CancelToken> cancel_;  // kept alive while attached
  TokenBatchSink sink_;
  std::function<void(GenerateCallResult)> done_;
  grpc::ClientContext ctx_;
  std::unique_ptr<pb::Decoder::Stub> stub_;
  pb::GenerateRequest req_;
  pb::GenerateResponse msg_;
  std::optional<CancelToken::Attachment> attachment_;
  ds41::Status malformed_;  // a bad message (or the sink threw): the call's end, whatever gRPC says
  GenerateCallResult res_;
};

}  // namespace

void NodeClient::GenerateAsync(const std::string& decoder, const GenerateInput& in, std::shared_ptr<CancelToken> cancel,
                               TokenBatchSink sink, std::function<void(GenerateCallResult)> done) const {
  if (cancel && cancel->cancelled()) {
    GenerateCallResult res;
    res.status = CancelledError("request cancelled");
    done(std::move(res));
    return;
  }
  auto* call = new GenerateCall(decoder, std::move(cancel), std::move(sink), std::move(done));
  call->Start(channels_->Get(decoder), in, fingerprint_);
}

GenerateCallResult NodeClient::Generate(const std::string& decoder, const GenerateInput& in, CancelToken* cancel,
                                        const TokenBatchSink& sink) const {
  std::promise<GenerateCallResult> ended;
  std::future<GenerateCallResult> result = ended.get_future();
  GenerateAsync(decoder, in, Borrowed(cancel), sink,
                [&ended](GenerateCallResult r) { ended.set_value(std::move(r)); });
  return result.get();
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
