// RouterService: the gRPC face of the front door (proto/router.proto) over the same OpenAiApi.
#pragma once

#include "router.grpc.pb.h"
#include "router/node_table.h"
#include "router/openai_api.h"

namespace ds41 {

class RouterService final : public ds41::router::v1::Router::Service {
 public:
  RouterService(OpenAiApi* api, const TenantTable* tenants, NodeTable* nodes);
  grpc::Status ChatCompletions(grpc::ServerContext* ctx, const ds41::router::v1::ApiRequest* req,
                               grpc::ServerWriter<ds41::router::v1::ApiChunk>* writer) override;
  grpc::Status Completions(grpc::ServerContext* ctx, const ds41::router::v1::ApiRequest* req,
                           grpc::ServerWriter<ds41::router::v1::ApiChunk>* writer) override;
  grpc::Status ListModels(grpc::ServerContext* ctx, const ds41::router::v1::ListModelsRequest* req,
                          ds41::router::v1::ListModelsResponse* resp) override;
  grpc::Status RegisterNode(grpc::ServerContext* ctx, const ds41::router::v1::RegisterNodeRequest* req,
                            ds41::router::v1::RegisterNodeResponse* resp) override;

 private:
  grpc::Status Run(bool chat, grpc::ServerContext* ctx, const ds41::router::v1::ApiRequest* req,
                   grpc::ServerWriter<ds41::router::v1::ApiChunk>* writer);
  OpenAiApi* api_;
  const TenantTable* tenants_;
  NodeTable* nodes_;
};

}  // namespace ds41
