#include "router/router_service.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "router/http_front.h"
#include "rpc/status_map.h"
#include "util/mutex.h"
#include "util/sha256.h"
#include "util/thread_annotations.h"

namespace ds41 {

namespace pb = ds41::router::v1;

namespace {

// One streaming API call. Chunks are queued as the API produces them (on whichever thread) and
// written one at a time; the RPC finishes once the queue has drained. No thread waits on a write.
class ApiCallReactor final : public grpc::ServerWriteReactor<pb::ApiChunk> {
 public:
  // A client this far behind is treated as gone (as the HTTP front door's write queue limit).
  static constexpr size_t kMaxQueuedBytes = 8 << 20;

  explicit ApiCallReactor(grpc::CallbackServerContext* call)
      : call_(call), deadline_(call->deadline()), cancel_(std::make_shared<CancelToken>()) {}

  const std::shared_ptr<CancelToken>& cancel() const { return cancel_; }

  // Queues one chunk; false once the client cannot take more (gone, or too far behind).
  bool Write(const Json& chunk) {
    std::string bytes = WireJson(chunk);
    {
      MutexLock l(&mu_);
      if (failed_) return false;
      if (writing_) {
        queued_bytes_ += bytes.size();
        if (queued_bytes_ > kMaxQueuedBytes) {
          failed_ = true;
          queue_.clear();
          queued_bytes_ = 0;
          return false;
        }
        queue_.push_back(std::move(bytes));
        return true;
      }
      writing_ = true;
    }
    // The one write in flight is ours (writing_), so msg_ is ours; StartWrite runs unlocked, as its
    // OnWriteDone may run inline.
    msg_.set_chunk_json(std::move(bytes));
    StartWrite(&msg_);
    return true;
  }

  // Finishes the RPC with `status` once the queued chunks are written; a refusal for load carries
  // its Retry-After as the trailing metadata "retry-after" (seconds), as HTTP's header.
  void End(grpc::Status status, int retry_after_s = 0) {
    if (retry_after_s > 0) call_->AddTrailingMetadata("retry-after", std::to_string(retry_after_s));
    {
      MutexLock l(&mu_);
      if (writing_) {
        finish_ = std::move(status);
        return;
      }
    }
    Finish(status);
  }

  void OnWriteDone(bool ok) override {
    std::optional<grpc::Status> finish;
    bool next = false;
    {
      MutexLock l(&mu_);
      if (!ok) {
        failed_ = true;
        queue_.clear();
        queued_bytes_ = 0;
      }
      if (!queue_.empty()) {
        queued_bytes_ -= queue_.front().size();
        msg_.set_chunk_json(std::move(queue_.front()));
        queue_.pop_front();
        next = true;
      } else {
        writing_ = false;
        finish = std::move(finish_);
        finish_.reset();
      }
    }
    if (next) {
      StartWrite(&msg_);
    } else if (finish) {
      Finish(*finish);
    }
  }
  // The client went away or its deadline passed: generation stops.
  void OnCancel() override { cancel_->Cancel(CancelReasonNow(deadline_)); }
  void OnDone() override { delete this; }

 private:
  grpc::CallbackServerContext* const call_;
  const std::chrono::system_clock::time_point deadline_;
  std::shared_ptr<CancelToken> cancel_;
  Mutex mu_;
  pb::ApiChunk msg_;  // the write in flight
  bool writing_ DS41_GUARDED_BY(mu_) = false;
  bool failed_ DS41_GUARDED_BY(mu_) = false;
  std::deque<std::string> queue_ DS41_GUARDED_BY(mu_);
  size_t queued_bytes_ DS41_GUARDED_BY(mu_) = 0;
  std::optional<grpc::Status> finish_ DS41_GUARDED_BY(mu_);  // End came while a write was in flight
};

}  // namespace

StatusOr<CheckedApiRequest> CheckApiRequest(const TenantTable& tenants, const pb::ApiRequest& req) {
  DS41_ASSIGN_OR_RETURN(Tenant tenant, tenants.Resolve(req.api_key()));
  return CheckApiBody(std::move(tenant), req);
}

StatusOr<CheckedApiRequest> CheckApiBody(Tenant tenant, const pb::ApiRequest& req) {
  CheckedApiRequest c;
  c.tenant = std::move(tenant);
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

RouterService::RouterService(OpenAiApi* api, const TenantTable* tenants, ThreadPool* workers)
    : api_(api), tenants_(tenants), workers_(workers) {}

grpc::ServerWriteReactor<pb::ApiChunk>* RouterService::Start(grpc::CallbackServerContext* call, bool chat,
                                                             const pb::ApiRequest* req) {
  const auto arrival = std::chrono::steady_clock::now();
  auto* reactor = new ApiCallReactor(call);
  // The call's deadline, as the router's steady clock reads it (none: infinite).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  const auto left = call->deadline() - std::chrono::system_clock::now();
  if (left < std::chrono::hours(24 * 365)) {
    deadline = arrival + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
  }
  auto refuse = [reactor](const grpc::Status& s, int retry_after_s = 0) {
    reactor->End(s, retry_after_s);
    return reactor;
  };
  // Admitted on arrival, as the HTTP front door does: over its tenant's quota or --max-running is
  // refused now, before the body is parsed (a request refused below gives its place back at once).
  StatusOr<Tenant> tenant = tenants_->Resolve(req->api_key());
  if (!tenant.ok()) return refuse(ToGrpc(tenant.status()));
  std::shared_ptr<RouteAdmission> admission;
  if (std::optional<ApiOutcome> refused = api_->Admit(*tenant, &admission)) {
    return refuse(ToGrpc(refused->status), refused->retry_after_s);
  }
  StatusOr<CheckedApiRequest> checked = CheckApiBody(std::move(*tenant), *req);
  if (!checked.ok()) return refuse(ToGrpc(checked.status()));
  ApiContext ctx;
  ctx.tenant = std::move(checked->tenant);
  ctx.session_id = std::move(checked->session_id);
  ctx.cancel = reactor->cancel();
  ctx.deadline = deadline;
  ctx.arrival = arrival;
  ctx.admission = std::move(admission);
  workers_->Schedule([this, chat, reactor, ctx = std::move(ctx), body = std::move(checked->body)] {
    ChunkSink sink = [reactor](const Json& chunk) { return reactor->Write(chunk); };
    ApiDone done = [reactor](ApiOutcome out) { reactor->End(ToGrpc(out.status), out.retry_after_s); };
    api_->Serve(chat, ctx, body, std::move(sink), std::move(done));
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

AdminToken::AdminToken(const std::string& token) : set_(!token.empty()) {
  if (!set_) return;
  Sha256 h;
  h.Update(token);
  digest_ = h.Digest();
}

Status AdminToken::Check(const std::string& authorization) const {
  if (!set_) return PermissionDeniedError("the router's admin calls are off (no --admin-token-file)");
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.compare(0, kBearer.size(), kBearer) != 0) return UnauthenticatedError("missing or wrong admin token");
  Sha256 h;
  h.Update(std::string_view(authorization).substr(kBearer.size()));
  const std::array<uint8_t, 32> got = h.Digest();
  uint8_t diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff |= static_cast<uint8_t>(got[i] ^ digest_[i]);  // no early exit
  if (diff != 0) return UnauthenticatedError("missing or wrong admin token");
  return Status::Ok();
}

StatusOr<std::string> ReadAdminToken(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read the admin token file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!token.empty() && space(static_cast<unsigned char>(token.back()))) token.pop_back();
  size_t start = 0;
  while (start < token.size() && space(static_cast<unsigned char>(token[start]))) ++start;
  token.erase(0, start);
  if (token.size() < 16 || std::any_of(token.begin(), token.end(), [&](char c) { return space(static_cast<unsigned char>(c)); })) {
    return InvalidArgumentError("the admin token in " + path + " must be one word of at least 16 bytes");
  }
  return token;
}

RouterAdminService::RouterAdminService(NodeTable* nodes, AdminToken token) : nodes_(nodes), token_(std::move(token)) {}

grpc::Status RouterAdminService::RegisterNode(grpc::ServerContext* ctx, const pb::RegisterNodeRequest* req,
                                              pb::RegisterNodeResponse* resp) {
  std::string authorization;
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) authorization.assign(it->second.data(), it->second.size());
  if (const Status s = token_.Check(authorization); !s.ok()) return ToGrpc(s);
  const StatusOr<NodeRole> role = CheckRegisterNodeRole(*req);
  if (!role.ok()) return ToGrpc(role.status());
  const Status s = nodes_->Register(*role, req->address());
  if (!s.ok()) return ToGrpc(s);
  resp->set_state("healthy");
  return grpc::Status::OK;
}

}  // namespace ds41
