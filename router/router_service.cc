#include "router/router_service.h"

#include <thread>

#include "router/http_front.h"
#include "rpc/status_map.h"

namespace ds41 {

namespace pb = ds41::router::v1;

RouterService::RouterService(OpenAiApi* api, const TenantTable* tenants, NodeTable* nodes)
    : api_(api), tenants_(tenants), nodes_(nodes) {}

grpc::Status RouterService::Run(bool chat, grpc::ServerContext* gctx, const pb::ApiRequest* req,
                                grpc::ServerWriter<pb::ApiChunk>* writer) {
  auto tenant = tenants_->Resolve(req->api_key());
  if (!tenant.ok()) return ToGrpc(tenant.status());
  std::optional<Json> parsed = ParseRequestJson(req->body_json());
  if (!parsed || !parsed->is_object()) {
    return ToGrpc(InvalidArgumentError("body_json is not a JSON object"));
  }
  if (req->session_id().size() > 256) return ToGrpc(InvalidArgumentError("session_id too long"));
  Json body = std::move(*parsed);
  body["stream"] = true;
  ApiContext ctx{*tenant, req->session_id(), std::make_shared<CancelToken>()};
  // The client going away cancels generation.
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      if (gctx->IsCancelled()) {
        ctx.cancel->Cancel();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto sink = [&](const Json& chunk) {
    pb::ApiChunk c;
    c.set_chunk_json(WireJson(chunk));
    return writer->Write(c);
  };
  ApiOutcome out;
  try {
    out = chat ? api_->ChatCompletions(ctx, body, sink) : api_->Completions(ctx, body, sink);
  } catch (const std::exception& e) {
    out = OpenAiApi::Error(StatusCode::kInternal, std::string("internal error: ") + e.what());
  }
  done = true;
  watcher.join();
  return ToGrpc(out.status);
}

grpc::Status RouterService::ChatCompletions(grpc::ServerContext* ctx, const pb::ApiRequest* req,
                                            grpc::ServerWriter<pb::ApiChunk>* writer) {
  return Run(true, ctx, req, writer);
}

grpc::Status RouterService::Completions(grpc::ServerContext* ctx, const pb::ApiRequest* req,
                                        grpc::ServerWriter<pb::ApiChunk>* writer) {
  return Run(false, ctx, req, writer);
}

grpc::Status RouterService::ListModels(grpc::ServerContext*, const pb::ListModelsRequest*, pb::ListModelsResponse* resp) {
  resp->set_models_json(WireJson(api_->Models()));
  return grpc::Status::OK;
}

grpc::Status RouterService::RegisterNode(grpc::ServerContext*, const pb::RegisterNodeRequest* req, pb::RegisterNodeResponse* resp) {
  NodeRole role;
  if (req->role() == "encoder") {
    role = NodeRole::kEncoder;
  } else if (req->role() == "decoder") {
    role = NodeRole::kDecoder;
  } else {
    return ToGrpc(InvalidArgumentError("role must be \"encoder\" or \"decoder\""));
  }
  const Status s = nodes_->Register(role, req->address());
  if (s.code() == StatusCode::kInvalidArgument) return ToGrpc(s);
  resp->set_state(s.ok() ? "healthy" : s.code() == StatusCode::kFailedPrecondition ? "refused" : "down");
  resp->set_error(s.ok() ? "" : s.message());
  return s.code() == StatusCode::kFailedPrecondition ? ToGrpc(s) : grpc::Status::OK;
}

}  // namespace ds41
