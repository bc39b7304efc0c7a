// pace_node: a node test double for measuring the router's cost per open stream (stream_bench) and
// for the router's admission tests. It answers Encoder.Status and Decoder.Status as a healthy,
// idle node of the given checkpoint, and streams each Decoder.Generate call one token every
// --token-ms until the request's max_tokens, from one Asio thread however many calls are open. No
// model runs, so what a benchmark sees is the router's work, not the engine's. Prefill is not
// served (the router never calls it; decoders do).
//
//   pace_node --model DIR [--listen 127.0.0.1:0] [--token-ms 2000]
// prints "pace_node ready grpc=HOST:PORT" once serving.
#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>

#include "engine/config/fingerprint.h"
#include "node.grpc.pb.h"
#include "rpc/server.h"
#include "util/process.h"

namespace ds41 {
namespace {

namespace pb = ds41::node::v1;

std::atomic<int64_t> g_open{0};  // Generate calls in flight, reported as the decoder's running

// One Generate call: a timer per token on the shared io thread. Every step runs on that thread,
// so the timer, the count and the finish need no lock; the call owns itself through self_ until
// gRPC says it is done (OnDone), and a timer handler in flight keeps it alive after that.
class PacedStream final : public grpc::ServerWriteReactor<pb::GenerateResponse>,
                          public std::enable_shared_from_this<PacedStream> {
 public:
  PacedStream(asio::io_context* io, std::chrono::milliseconds pace, const pb::GenerateRequest& req)
      : io_(io), timer_(*io), pace_(pace) {
    const int64_t resumed = req.resumed_tokens();
    prompt_tokens_ = req.tokens_size() - resumed;
    cached_ = req.cached_tokens();
    left_ = req.sampling().max_tokens() > 0 ? req.sampling().max_tokens() : 16;
  }

  void Begin(std::shared_ptr<PacedStream> self) {
    self_ = std::move(self);
    ++g_open;
    asio::post(*io_, [s = shared_from_this()] { s->Arm(); });
  }

  void OnWriteDone(bool ok) override {
    asio::post(*io_, [s = shared_from_this(), ok] {
      if (!ok) return s->End(grpc::Status(grpc::StatusCode::CANCELLED, "the client is gone"));
      if (s->left_ == 0) return s->End(grpc::Status::OK);
      s->Arm();
    });
  }
  void OnCancel() override {
    asio::post(*io_, [s = shared_from_this()] { s->End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")); });
  }
  void OnDone() override {
    --g_open;
    asio::post(*io_, [s = shared_from_this()] { s->self_.reset(); });
  }

 private:
  void Arm() {
    if (ended_) return;
    timer_.expires_after(pace_);
    timer_.async_wait([s = shared_from_this()](const asio::error_code& ec) {
      if (!ec) s->Emit();
    });
  }

  void Emit() {
    if (ended_) return;
    msg_.Clear();
    msg_.add_tokens(100 + static_cast<int32_t>(sent_ % 1000));  // ordinary text ids, never a stop id
    ++sent_;
    --left_;
    if (left_ == 0) {
      msg_.set_finish_reason("length");
      pb::Usage* u = msg_.mutable_usage();
      u->set_prompt_tokens(prompt_tokens_);
      u->set_completion_tokens(sent_);
      u->set_cached_tokens(cached_);
      u->set_computed_tokens(prompt_tokens_ - cached_);
      u->set_prefix_source(cached_ > 0 ? "cache" : "none");
      u->set_swa_source("none");
    }
    StartWrite(&msg_);
  }

  void End(const grpc::Status& s) {
    if (ended_) return;
    ended_ = true;
    timer_.cancel();
    Finish(s);
  }

  asio::io_context* io_;
  asio::steady_timer timer_;
  const std::chrono::milliseconds pace_;
  int64_t prompt_tokens_ = 0, cached_ = 0, sent_ = 0;
  uint32_t left_ = 0;
  bool ended_ = false;
  pb::GenerateResponse msg_;
  std::shared_ptr<PacedStream> self_;
};

void FillStatus(const std::string& fingerprint, const char* role, pb::NodeStatus* st) {
  st->set_model_fingerprint(fingerprint);
  st->set_role(role);
  st->set_running(std::strcmp(role, "decoder") == 0 ? g_open.load() : 0);
  st->set_tokens_per_second(1000);
}

class PacedDecoder final : public pb::Decoder::WithCallbackMethod_Generate<pb::Decoder::Service> {
 public:
  PacedDecoder(asio::io_context* io, std::string fingerprint, std::chrono::milliseconds pace)
      : io_(io), fingerprint_(std::move(fingerprint)), pace_(pace) {}
  grpc::ServerWriteReactor<pb::GenerateResponse>* Generate(grpc::CallbackServerContext*,
                                                           const pb::GenerateRequest* req) override {
    auto s = std::make_shared<PacedStream>(io_, pace_, *req);
    s->Begin(s);
    return s.get();
  }
  grpc::Status Status(grpc::ServerContext*, const pb::NodeStatusRequest*, pb::NodeStatus* st) override {
    FillStatus(fingerprint_, "decoder", st);
    return grpc::Status::OK;
  }

 private:
  asio::io_context* io_;
  const std::string fingerprint_;
  const std::chrono::milliseconds pace_;
};

class PacedEncoder final : public pb::Encoder::Service {
 public:
  explicit PacedEncoder(std::string fingerprint) : fingerprint_(std::move(fingerprint)) {}
  grpc::Status Status(grpc::ServerContext*, const pb::NodeStatusRequest*, pb::NodeStatus* st) override {
    FillStatus(fingerprint_, "encoder", st);
    return grpc::Status::OK;
  }

 private:
  const std::string fingerprint_;
};

}  // namespace
}  // namespace ds41

int main(int argc, char** argv) {
  CLI::App app{"pace_node: a node test double that streams one token every --token-ms (benchmarks, tests)"};
  std::string model, listen = "127.0.0.1:0";
  int token_ms = 2000;
  app.add_option("--model", model, "checkpoint directory (its fingerprint is reported)")->required();
  app.add_option("--listen", listen, "gRPC address");
  app.add_option("--token-ms", token_ms, "milliseconds between a stream's tokens")->check(CLI::Range(1, 600000));
  CLI11_PARSE(app, argc, argv);
  auto identity = ds41::ReadModelIdentity(model);
  if (!identity.ok()) {
    std::cerr << identity.status().ToString() << "\n";
    return 1;
  }
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });
  ds41::PacedDecoder decoder(&io, identity->fingerprint, std::chrono::milliseconds(token_ms));
  ds41::PacedEncoder encoder(identity->fingerprint);
  ds41::RpcServerOptions options;
  options.address = listen;
  auto server = ds41::StartRpcServer(options, {&decoder, &encoder});
  if (!server.ok()) {
    std::cerr << "grpc: " << server.status().ToString() << "\n";
    return 1;
  }
  std::cout << "pace_node ready grpc=" << listen.substr(0, listen.rfind(':')) << ":" << server->port << std::endl;
  ds41::WaitForTerminationSignal();
  server->server->Shutdown(std::chrono::system_clock::now());
  work.reset();
  io.stop();
  io_thread.join();
  return 0;
}
