// RouterService: the gRPC face of the front door (proto/router.proto) over the same OpenAiApi. The two
// streaming calls use gRPC's callback API: a request is admitted on arrival, checked and tokenized on
// the router's worker pool (as HTTP requests are), then no thread waits for it: each chunk is queued
// and written as the API produces it, and a client that goes away cancels the request through
// OnCancel.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "router.grpc.pb.h"
#include "router/node_table.h"
#include "router/openai_api.h"
#include "util/thread_pool.h"

namespace ds41 {

// An ApiRequest checked as the streaming calls check it before any work: the tenant its api_key
// names, the body a JSON object (forced to stream), a session id of at most 256 bytes. Errors are
// the tenant table's (UNAUTHENTICATED) or INVALID_ARGUMENT. Pure: fuzz/grpc_request_fuzzer.cc runs
// it on messages parsed from arbitrary bytes, then the OpenAiApi call the service would make.
struct CheckedApiRequest {
  Tenant tenant;
  std::string session_id;
  Json body;
};
StatusOr<CheckedApiRequest> CheckApiRequest(const TenantTable& tenants, const ds41::router::v1::ApiRequest& req);
// The same for a request whose tenant is already resolved (the service resolves it first, to admit it).
StatusOr<CheckedApiRequest> CheckApiBody(Tenant tenant, const ds41::router::v1::ApiRequest& req);

// The role a RegisterNodeRequest names, or INVALID_ARGUMENT.
StatusOr<NodeRole> CheckRegisterNodeRole(const ds41::router::v1::RegisterNodeRequest& req);

using RouterServiceBase = ds41::router::v1::Router::WithCallbackMethod_ChatCompletions<
    ds41::router::v1::Router::WithCallbackMethod_Completions<ds41::router::v1::Router::Service>>;

class RouterService final : public RouterServiceBase {
 public:
  // `workers` checks and tokenizes the requests (shared with the HTTP front door).
  RouterService(OpenAiApi* api, const TenantTable* tenants, ThreadPool* workers);
  grpc::ServerWriteReactor<ds41::router::v1::ApiChunk>* ChatCompletions(grpc::CallbackServerContext* ctx,
                                                                         const ds41::router::v1::ApiRequest* req) override;
  grpc::ServerWriteReactor<ds41::router::v1::ApiChunk>* Completions(grpc::CallbackServerContext* ctx,
                                                                     const ds41::router::v1::ApiRequest* req) override;
  grpc::Status ListModels(grpc::ServerContext* ctx, const ds41::router::v1::ListModelsRequest* req,
                          ds41::router::v1::ListModelsResponse* resp) override;

 private:
  grpc::ServerWriteReactor<ds41::router::v1::ApiChunk>* Start(grpc::CallbackServerContext* call, bool chat,
                                                              const ds41::router::v1::ApiRequest* req);
  OpenAiApi* api_;
  const TenantTable* tenants_;
  ThreadPool* workers_;
};

// The admin token's check: constant-time over SHA-256 digests, as API keys are. An empty token
// refuses every call (PERMISSION_DENIED: registration is off); a call whose "authorization" metadata
// is not "Bearer <token>" is UNAUTHENTICATED.
class AdminToken {
 public:
  explicit AdminToken(const std::string& token);
  Status Check(const std::string& authorization) const;

 private:
  bool set_ = false;
  std::array<uint8_t, 32> digest_{};
};

// Reads an admin token file (the token, surrounding whitespace dropped): INVALID_ARGUMENT when it
// is shorter than 16 bytes or holds whitespace inside, NOT_FOUND when unreadable.
StatusOr<std::string> ReadAdminToken(const std::string& path);

// RouterAdmin: the control plane (proto/router.proto), its own service, refused without the token.
class RouterAdminService final : public ds41::router::v1::RouterAdmin::Service {
 public:
  RouterAdminService(NodeTable* nodes, AdminToken token);
  grpc::Status RegisterNode(grpc::ServerContext* ctx, const ds41::router::v1::RegisterNodeRequest* req,
                            ds41::router::v1::RegisterNodeResponse* resp) override;

 private:
  NodeTable* nodes_;
  const AdminToken token_;
};

}  // namespace ds41
