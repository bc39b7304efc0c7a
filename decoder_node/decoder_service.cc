#include "decoder_node/decoder_service.h"

#include "node_client/node_codec.h"
#include "rpc/status_map.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

namespace pb = ds41::node::v1;

namespace {

// One Generate call: writes what the stream holds, one write in flight at a time, then the last
// message with the finish reason and usage (or the error). Deletes itself when gRPC is done with it.
//
// A push wakes a pump on the service's writer threads, never on the pushing thread: starting a gRPC
// write runs the transport's work inline, and the pusher is the decode loop, whose every
// millisecond is a step of every running sequence (writing inline made decoding ~40% slower).
class GenerateReactor final : public grpc::ServerWriteReactor<pb::GenerateResponse> {
 public:
  // Ends at once with `refused` when it is not OK; otherwise starts the request on `core`.
  GenerateReactor(DecoderCore* core, ThreadPool* writers, GenerateInput in, const Status& refused,
                  std::chrono::system_clock::time_point deadline)
      : writers_(writers), deadline_(deadline) {
    if (!refused.ok()) {
      Finish(ToGrpc(refused));
      return;
    }
    stream_ = std::make_shared<TokenStream>();
    stream_->SetListener([this] { SchedulePump(); });
    core->Start(std::move(in), stream_);
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock l(&mu_);
      writing_ = false;
    }
    if (!ok) stream_->Cancel();  // the client is gone: free the sequence; the stream still finishes
    Pump();
  }

  void OnCancel() override {
    if (stream_) stream_->Cancel(CancelReasonNow(deadline_));
  }

  void OnDone() override {
    if (stream_) stream_->SetListener(nullptr);  // waits out a listener call in progress
    {
      MutexLock l(&mu_);
      cv_.Wait(&mu_, [this]() DS41_REQUIRES(mu_) { return pumps_pending_ == 0; });  // a queued pump still uses this
    }
    delete this;
  }

 private:
  // One queued pump covers every push before it runs.
  void SchedulePump() {
    {
      MutexLock l(&mu_);
      if (pump_queued_) return;
      pump_queued_ = true;
      ++pumps_pending_;
    }
    writers_->Schedule([this] {
      {
        MutexLock l(&mu_);
        pump_queued_ = false;
      }
      Pump();
      MutexLock l(&mu_);
      --pumps_pending_;
      cv_.NotifyAll();  // under the lock: OnDone deletes this as soon as it can take it
    });
  }

  // Starts the next write, or the finish once the stream is done and drained. gRPC is called
  // outside the lock: a reaction it runs inline may come back here.
  void Pump() {
    grpc::Status error;
    enum { kWrite, kFinishWithError, kWriteAndFinish } action;
    {
      MutexLock l(&mu_);
      if (writing_ || finished_) return;
      GeneratedTokens tokens;
      const bool done = stream_->Take(&tokens);
      if (tokens.ids.empty() && !done) return;
      msg_.Clear();
      if (!tokens.ids.empty()) {
        EncodeGenerated(tokens, &msg_);
        writing_ = true;
        action = kWrite;
      } else if (const Status st = stream_->status(); !st.ok()) {
        finished_ = true;
        error = ToGrpc(st);
        action = kFinishWithError;
      } else {
        finished_ = true;
        msg_.set_finish_reason(stream_->finish_reason());
        EncodeUsage(stream_->usage(), msg_.mutable_usage());
        action = kWriteAndFinish;
      }
    }
    switch (action) {
      case kWrite: StartWrite(&msg_); break;
      case kFinishWithError: Finish(error); break;
      case kWriteAndFinish: StartWriteAndFinish(&msg_, grpc::WriteOptions(), grpc::Status::OK); break;
    }
  }

  ThreadPool* writers_;
  const std::chrono::system_clock::time_point deadline_;
  std::shared_ptr<TokenStream> stream_;
  Mutex mu_;
  CondVar cv_;
  bool pump_queued_ DS41_GUARDED_BY(mu_) = false;
  int pumps_pending_ DS41_GUARDED_BY(mu_) = 0;
  pb::GenerateResponse msg_;  // the write in flight: filled under mu_, then gRPC's until OnWriteDone
  bool writing_ DS41_GUARDED_BY(mu_) = false;
  bool finished_ DS41_GUARDED_BY(mu_) = false;
};

}  // namespace

DecoderService::DecoderService(DecoderCore* core, const std::string& fingerprint, NodeMetrics* metrics,
                               ThreadPool* writers)
    : core_(core), fingerprint_(fingerprint), metrics_(metrics), writers_(writers) {}

grpc::ServerWriteReactor<pb::GenerateResponse>* DecoderService::Generate(grpc::CallbackServerContext* ctx,
                                                                         const pb::GenerateRequest* req) {
  GenerateInput in;
  const ds41::Status s = DecodeGenerateRequest(*req, fingerprint_, &in);
  if (!s.ok() && metrics_) metrics_->CountOutcome(s);
  const auto remaining = ctx->deadline() - std::chrono::system_clock::now();
  in.deadline = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::min<std::chrono::system_clock::duration>(remaining, std::chrono::hours(1)));
  return new GenerateReactor(core_, writers_, std::move(in), s, ctx->deadline());
}

grpc::Status DecoderService::Status(grpc::ServerContext*, const pb::NodeStatusRequest*, pb::NodeStatus* resp) {
  NodeStatusReport r;
  r.fingerprint = fingerprint_;
  r.role = NodeRoleName(NodeRole::kDecoder);
  r.running = core_->running();
  r.waiting = core_->waiting();
  r.resident_bytes = core_->ResidentBytes();
  r.warm_sessions = core_->WarmSessions();
  EncodeNodeStatus(r, resp);
  return grpc::Status::OK;
}

}  // namespace ds41
