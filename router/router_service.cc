#include "router/router_service.h"

#include <condition_variable>
#include <functional>
#include <mutex>

#include "router/http_front.h"
#include "rpc/status_map.h"
#include "util/thread_annotations.h"

namespace ds41 {

namespace pb = ds41::router::v1;

namespace {

// One streaming API call: the request runs on a worker, which hands each chunk to gRPC and waits
// for that write to finish (one in flight, and the API's sink learns whether the client took it).
class ApiCallReactor final : public grpc::ServerWriteReactor<pb::ApiChunk> {
 public:
  explicit ApiCallReactor(std::chrono::system_clock::time_point deadline)
      : deadline_(deadline), cancel_(std::make_shared<CancelToken>()) {}

  // Runs `call` on `workers`, then finishes the RPC with its status.
  void Run(ThreadPool* workers, std::function<grpc::Status(const std::shared_ptr<CancelToken>&, const ChunkSink&)> call) {
    workers->Schedule([this, call = std::move(call)] {
      const grpc::Status status = call(cancel_, [this](const Json& chunk) { return Write(chunk); });
      Finish(status);
    });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    writing_ = false;
    write_ok_ = ok;
    cv_.notify_all();
  }
  // The client went away or its deadline passed: generation stops.
  void OnCancel() override { cancel_->Cancel(CancelReasonNow(deadline_)); }
  void OnDone() override { delete this; }

 private:
  bool Write(const Json& chunk) {
    {
      std::lock_guard<std::mutex> l(mu_);
      msg_.set_chunk_json(WireJson(chunk));
      writing_ = true;
    }
    StartWrite(&msg_);
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return !writing_; });  // OnWriteDone always comes, cancelled or not
    return write_ok_;
  }

  const std::chrono::system_clock::time_point deadline_;
  std::shared_ptr<CancelToken> cancel_;
  std::mutex mu_;
  std::condition_variable cv_;
  pb::ApiChunk msg_;       // the write in flight
  bool writing_ DS41_GUARDED_BY(mu_) = false;
  bool write_ok_ DS41_GUARDED_BY(mu_) = true;
};

}  // namespace

StatusOr<CheckedApiRequest> CheckApiRequest(const TenantTable& tenants, const pb::ApiRequest& req) {
  CheckedApiRequest c;
  DS41_ASSIGN_OR_RETURN(c.tenant, tenants.Resolve(req.api_key()));
  std::optional<Json> parsed = ParseRequestJson(req.body_json());
  if (!parsed || !parsed->is_object()) return InvalidArgumentError("body_json is not a JSON object");
  if (req.session_id().size() > 256) return InvalidArgumentError("session_id too long");
  c.session_id = req.session_id();
  c.body = std::move(*parsed);
  c.body["stream"] = true;
  return c;
}

StatusOr<NodeRole> CheckRegisterNodeRole(const pb::RegisterNodeRequest& req) {
  if (req.role() == "encoder") return NodeRole::kEncoder;
  if (req.role() == "decoder") return NodeRole::kDecoder;
  return InvalidArgumentError("role must be \"encoder\" or \"decoder\"");
}

RouterService::RouterService(OpenAiApi* api, const TenantTable* tenants, NodeTable* nodes, ThreadPool* workers)
    : api_(api), tenants_(tenants), nodes_(nodes), workers_(workers) {}

grpc::ServerWriteReactor<pb::ApiChunk>* RouterService::Start(grpc::CallbackServerContext* call, bool chat,
                                                             const pb::ApiRequest* req) {
  auto* reactor = new ApiCallReactor(call->deadline());
  // The call's deadline, as the router's steady clock reads it (none: infinite).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  const auto left = call->deadline() - std::chrono::system_clock::now();
  if (left < std::chrono::hours(24 * 365)) {
    deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
  }
  auto refuse = [reactor](const grpc::Status& s) {
    reactor->Finish(s);
    return reactor;
  };
  StatusOr<CheckedApiRequest> checked = CheckApiRequest(*tenants_, *req);
  if (!checked.ok()) return refuse(ToGrpc(checked.status()));
  reactor->Run(workers_, [this, chat, tenant = std::move(checked->tenant), session = std::move(checked->session_id),
                          body = std::move(checked->body),
                          deadline](const std::shared_ptr<CancelToken>& cancel, const ChunkSink& sink) {
    const ApiContext ctx{tenant, session, cancel, deadline};
    ApiOutcome out;
    try {
      out = chat ? api_->ChatCompletions(ctx, body, sink) : api_->Completions(ctx, body, sink);
    } catch (const std::exception& e) {
      out = OpenAiApi::Error(StatusCode::kInternal, std::string("internal error: ") + e.what());
    }
    return ToGrpc(out.status);
  });
  return reactor;
}

grpc::ServerWriteReactor<pb::ApiChunk>* RouterService::ChatCompletions(grpc::CallbackServerContext* ctx,
                                                                       const pb::ApiRequest* req) {
  return Start(ctx, true, req);
}

grpc::ServerWriteReactor<pb::ApiChunk>* RouterService::Completions(grpc::CallbackServerContext* ctx,
                                                                   const pb::ApiRequest* req) {
  return Start(ctx, false, req);
}

grpc::Status RouterService::ListModels(grpc::ServerContext*, const pb::ListModelsRequest*, pb::ListModelsResponse* resp) {
  resp->set_models_json(WireJson(api_->Models()));
  return grpc::Status::OK;
}

grpc::Status RouterService::RegisterNode(grpc::ServerContext*, const pb::RegisterNodeRequest* req, pb::RegisterNodeResponse* resp) {
  const StatusOr<NodeRole> role = CheckRegisterNodeRole(*req);
  if (!role.ok()) return ToGrpc(role.status());
  const Status s = nodes_->Register(*role, req->address());
  if (s.code() == StatusCode::kInvalidArgument) return ToGrpc(s);
  resp->set_state(s.ok() ? "healthy" : s.code() == StatusCode::kFailedPrecondition ? "refused" : "down");
  resp->set_error(s.ok() ? "" : s.message());
  return s.code() == StatusCode::kFailedPrecondition ? ToGrpc(s) : grpc::Status::OK;
}

}  // namespace ds41
