// DecoderService: the decoder node's gRPC face over DecoderCore. Generate is a callback-API stream:
// the core admits the request on its own threads and each push queues a write on the service's
// writer threads, so no thread waits or polls per call; a client that cancels cancels the stream,
// which interrupts its prefill call or frees its sequence at the next step. The node also registers
// SwaStateService over the core's pool. Thread-safe, as gRPC calls it.
#pragma once

#include <string>

#include "decoder_node/decoder_core.h"
#include "node.grpc.pb.h"
#include "util/thread_pool.h"

namespace ds41 {

class DecoderService final : public ds41::node::v1::Decoder::WithCallbackMethod_Generate<ds41::node::v1::Decoder::Service> {
 public:
  // `writers` starts the streams' writes (a pool of its own: a write queued behind store calls or
  // replays would hold up a token); it outlives the service.
  DecoderService(DecoderCore* core, const std::string& fingerprint, NodeMetrics* metrics, ThreadPool* writers);
  grpc::ServerWriteReactor<ds41::node::v1::GenerateResponse>* Generate(grpc::CallbackServerContext* ctx,
                                                                       const ds41::node::v1::GenerateRequest* req) override;
  grpc::Status Status(grpc::ServerContext* ctx, const ds41::node::v1::NodeStatusRequest* req,
                      ds41::node::v1::NodeStatus* resp) override;

 private:
  DecoderCore* core_;
  std::string fingerprint_;
  NodeMetrics* metrics_;
  ThreadPool* writers_;
};

}  // namespace ds41
