#include "decoder_node/decoder_service.h"

#include "rpc/status_map.h"
#include "serving/node_protocol.h"

namespace ds41 {
namespace {
namespace pb = ds41::node::v1;
}  // namespace

DecoderService::DecoderService(DecoderCore* core, const std::string& fingerprint, NodeMetrics* metrics)
    : core_(core), fingerprint_(fingerprint), metrics_(metrics) {}

grpc::Status DecoderService::Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                                      grpc::ServerWriter<pb::GenerateResponse>* writer) {
  auto invalid = [this](const ds41::Status& s) {
    if (metrics_) metrics_->requests_invalid.Increment();
    return ToGrpc(s);
  };
  if (ds41::Status s = CheckModel(req->model(), fingerprint_); !s.ok()) return invalid(s);
  GenerateInput in;
  if (ds41::Status s = ParseNs(req->ns(), &in.ns); !s.ok()) return invalid(s);
  if (static_cast<size_t>(req->tokens_size()) > kMaxPromptTokens)
    return invalid(InvalidArgumentError("prompt longer than " + std::to_string(kMaxPromptTokens) + " tokens"));
  if (req->sampling().stop_token_ids_size() > 1024) return invalid(InvalidArgumentError("too many stop tokens"));
  in.request_id = req->request_id();
  in.session_id = req->session_id().substr(0, 256);
  in.tokens.assign(req->tokens().begin(), req->tokens().end());
  in.cached_tokens = req->cached_tokens();
  in.encoder = req->encoder();
  in.swa_peer = req->swa().peer();
  in.sampling.temperature = req->sampling().temperature();
  in.sampling.top_p = req->sampling().top_p() == 0 ? 1.0f : req->sampling().top_p();
  in.sampling.seed = req->sampling().seed();
  in.max_tokens = req->sampling().max_tokens() == 0 ? 16 : req->sampling().max_tokens();
  in.stop_ids.assign(req->sampling().stop_token_ids().begin(), req->sampling().stop_token_ids().end());
  in.unit_tokens = req->unit_tokens() == 0 ? kDefaultUnitTokens : req->unit_tokens();
  const auto remaining = ctx->deadline() - std::chrono::system_clock::now();
  in.deadline = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::min<std::chrono::system_clock::duration>(remaining, std::chrono::hours(1)));

  std::shared_ptr<TokenStream> stream = core_->Generate(std::move(in));
  std::vector<int32_t> tokens;
  for (;;) {
    if (ctx->IsCancelled()) stream->Cancel();
    const bool done = stream->Pop(&tokens, std::chrono::milliseconds(50));
    if (!tokens.empty()) {
      pb::GenerateResponse r;
      for (int32_t t : tokens) r.add_tokens(t);
      if (!writer->Write(r)) stream->Cancel();
    }
    if (done) break;
  }
  const ds41::Status st = stream->status();
  if (!st.ok()) return ToGrpc(st);
  const GenerateUsage u = stream->usage();
  pb::GenerateResponse last;
  last.set_finish_reason(stream->finish_reason());
  auto* us = last.mutable_usage();
  us->set_prompt_tokens(u.prompt_tokens);
  us->set_completion_tokens(u.completion_tokens);
  us->set_cached_tokens(u.cached_tokens);
  us->set_computed_tokens(u.computed_tokens);
  us->set_encoder_replay_tokens(u.encoder_replay_tokens);
  us->set_decoder_replay_tokens(u.decoder_replay_tokens);
  us->set_prefix_source(u.prefix_source);
  us->set_swa_source(u.swa_source);
  us->set_ttft_seconds(u.ttft_seconds);
  writer->Write(last);
  return grpc::Status::OK;
}

grpc::Status DecoderService::GetSwaState(grpc::ServerContext*, const pb::SwaStateRequest* req, pb::SwaStateResponse* resp) {
  return ToGrpc(ServeSwaState(
      *req, fingerprint_, [this](const UnitKey& ns, const UnitKey& key) { return core_->GetSwa(ns, key); }, resp));
}

grpc::Status DecoderService::Status(grpc::ServerContext*, const pb::NodeStatusRequest*, pb::NodeStatus* resp) {
  resp->set_model_fingerprint(fingerprint_);
  resp->set_role("decoder");
  resp->set_running(core_->running());
  resp->set_waiting(core_->waiting());
  resp->set_resident_bytes(static_cast<int64_t>(core_->ResidentBytes()));
  for (const auto& [id, length] : core_->WarmSessions()) {
    resp->add_warm_sessions(id);
    resp->add_warm_session_lengths(length);
  }
  return grpc::Status::OK;
}

}  // namespace ds41
