// The router's admission and its asynchronous request path, against real router processes over
// bench/pace_node (a node test double that streams one token every --token-ms; a real decoder would
// finish these replies in a moment): a stream holds no router thread, --max-running counts from
// arrival and answers 429 with Retry-After at once, and cancellation reaches every open stream
// (issue 42, items 1, 3 and 4).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "router.grpc.pb.h"
#include "tests/support/child_process.h"
#include "tests/support/test_checkpoint.h"

namespace ds41 {
namespace {

using nlohmann::json;
using testing::ChildProcess;
using Clock = std::chrono::steady_clock;

std::string Bin(const std::string& rel) { return testing::BinaryDir() + "/" + rel; }

// A request on its own connection, left open; Head() reads until the response's head has come.
class RawRequest {
 public:
  RawRequest(int port, const std::string& body, const std::string& api_key = "") : api_key_(api_key) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    Send(body);
  }
  // Another request on the same (kept-alive) connection, once the last response was read whole.
  void Send(const std::string& body) {
    in_.clear();
    const std::string auth = api_key_.empty() ? "" : "Authorization: Bearer " + api_key_ + "\r\n";
    const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                            auth + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (connected_) connected_ = write(fd_, req.data(), req.size()) == static_cast<ssize_t>(req.size());
  }
  ~RawRequest() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // The response's head (status line and headers), "" when none came by `timeout`.
  std::string Head(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (!WaitFor("\r\n\r\n", timeout)) return "";
    return in_.substr(0, in_.find("\r\n\r\n"));
  }
  // Reads until `text` has come (true) or `timeout` passes (false).
  bool WaitFor(const std::string& text, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    return ReadUntil([&] { return in_.find(text) != std::string::npos; }, Clock::now() + timeout);
  }
  // A plain (not streamed) response's body, after Head(): Content-Length bytes ("" if they never came).
  std::string Body(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const std::string head = Head(timeout);
    const size_t at = head.find("Content-Length: ");
    if (at == std::string::npos) return "";
    const size_t length = std::stoul(head.substr(at + 16));
    const size_t start = head.size() + 4;
    if (!ReadUntil([&] { return in_.size() >= start + length; }, Clock::now() + timeout)) return "";
    return in_.substr(start, length);
  }

 private:
  // Reads what comes until `done()` holds (true) or `end` passes, or the connection fails (false).
  template <typename Done>
  bool ReadUntil(const Done& done, Clock::time_point end) {
    while (connected_ && !done()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return false;
      char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) return false;
      in_.append(buf, static_cast<size_t>(n));
    }
    return connected_;
  }

  std::string api_key_;
  int fd_ = -1;
  bool connected_ = false;
  std::string in_;
};

struct PacedCluster {
  std::string model = testing::SmallServingCheckpoint();
  std::unique_ptr<ChildProcess> encoder, decoder, router;
  std::string http;
  int port = 0;

  // Tokens `token_ms` apart (by default a minute: every stream stays open for the whole test).
  explicit PacedCluster(const std::vector<std::string>& router_flags, int token_ms = 60000) {
    const std::string pace = std::to_string(token_ms);
    encoder = std::make_unique<ChildProcess>(std::vector<std::string>{Bin("bench/pace_node"), "--model", model, "--token-ms", pace},
                                             "pace_node ready");
    decoder = std::make_unique<ChildProcess>(std::vector<std::string>{Bin("bench/pace_node"), "--model", model, "--token-ms", pace},
                                             "pace_node ready");
    std::vector<std::string> argv = {Bin("router/router"), "--model", model, "--listen", "127.0.0.1:0", "--grpc-listen",
                                     "127.0.0.1:0", "--encoders", encoder->fields()["grpc"], "--decoders",
                                     decoder->fields()["grpc"], "--placement", "round_robin"};
    argv.insert(argv.end(), router_flags.begin(), router_flags.end());
    router = std::make_unique<ChildProcess>(argv, "router ready");
    http = router->fields()["http"];
    port = std::stoi(http.substr(http.rfind(':') + 1));
  }
  std::string Metrics() const { return testing::HttpGet(http, "/metrics"); }
};

std::string StreamBody(int i) {
  return R"({"stream": true, "max_tokens": 8, "messages": [{"role": "user", "content": "turn )" + std::to_string(i) + R"("}]})";
}

TEST(RouterAdmissionTest, StreamsBeyondTheWorkersAreServedAndOneOverTheLimitIs429AtOnce) {
  constexpr int kLimit = 40;
  // Two request threads (one is the caller's), and twenty times as many streams.
  PacedCluster c({"--max-running", std::to_string(kLimit), "--workers", "2"});
  ASSERT_TRUE(c.router->ready());
  std::vector<std::unique_ptr<RawRequest>> open;
  open.push_back(std::make_unique<RawRequest>(c.port, StreamBody(0)));
  ASSERT_EQ(open.back()->Head().substr(0, 12), "HTTP/1.1 200");
  const int threads_at_one = testing::ThreadsOf(c.router->pid());
  for (int i = 1; i < kLimit; ++i) open.push_back(std::make_unique<RawRequest>(c.port, StreamBody(i)));
  // Every stream gets its head (and its first chunk) while all of them stay open.
  for (int i = 1; i < kLimit; ++i) ASSERT_EQ(open[static_cast<size_t>(i)]->Head().substr(0, 12), "HTTP/1.1 200") << i;
  std::string metrics = c.Metrics();
  EXPECT_EQ(testing::Metric(metrics, "ds41_router_running_requests"), kLimit);
  // The thread count does not follow the streams (gRPC's own pools may add a poller or two).
  EXPECT_NEAR(testing::ThreadsOf(c.router->pid()), threads_at_one, 2);

  // One over the limit: refused at once, on arrival, with Retry-After.
  const auto t0 = Clock::now();
  RawRequest over(c.port, StreamBody(kLimit));
  const std::string head = over.Head(std::chrono::seconds(5));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(head.substr(0, 12), "HTTP/1.1 429") << head;
  EXPECT_NE(head.find("Retry-After: "), std::string::npos) << head;
  EXPECT_LT(ms, 2000) << "a refusal must not wait for a stream to end";

  // Clients that leave cancel their streams through the asynchronous path: the router's count
  // falls to zero, and a new request is served again.
  open.clear();
  double running = -1;
  for (int i = 0; i < 100 && running != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    running = testing::Metric(c.Metrics(), "ds41_router_running_requests");
  }
  EXPECT_EQ(running, 0);
  RawRequest again(c.port, StreamBody(kLimit + 1));
  EXPECT_EQ(again.Head().substr(0, 12), "HTTP/1.1 200");
}

int GetStatus(const std::string& http, const std::string& path) {
  // testing::HttpGet returns the body only; a status line is what a probe reads.
  const int port = std::stoi(http.substr(http.rfind(':') + 1));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int status = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[64] = {};
      if (read(fd, buf, sizeof buf - 1) > 12) status = std::atoi(buf + 9);
    }
  }
  close(fd);
  return status;
}

TEST(RouterAdmissionTest, LivenessStaysUpWhileTheDecoderPoolIsDown) {
  PacedCluster c({"--poll-ms", "100"});
  ASSERT_TRUE(c.router->ready());
  EXPECT_EQ(GetStatus(c.http, "/livez"), 200);
  EXPECT_EQ(GetStatus(c.http, "/health"), 200);
  c.decoder->Kill(SIGKILL);  // the whole decoder pool
  int health = 200;
  for (int i = 0; i < 100 && health == 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    health = GetStatus(c.http, "/health");
  }
  EXPECT_EQ(health, 503) << "readiness reports the pools";
  EXPECT_EQ(GetStatus(c.http, "/livez"), 200) << "liveness must not: a pool outage would restart every router";
}

// RouterAdmin.RegisterNode through a real gRPC channel, with `authorization` as its metadata.
grpc::StatusCode RegisterNode(const std::string& router_grpc, const std::string& authorization, const std::string& role,
                              const std::string& address) {
  auto stub = router::v1::RouterAdmin::NewStub(grpc::CreateChannel(router_grpc, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  router::v1::RegisterNodeRequest req;
  req.set_role(role);
  req.set_address(address);
  router::v1::RegisterNodeResponse resp;
  return stub->RegisterNode(&ctx, req, &resp).error_code();
}

TEST(RouterAdmissionTest, NodeRegistrationNeedsTheAdminTokenAndAProvenRole) {
  const std::string dir = testing::TempDir("admin");
  std::ofstream(dir + "/token") << "adm-0123456789abcdef\n";
  std::ofstream(dir + "/keys.json") << R"({"keys": {"sk-tenant-0123456789": {"tenant": "t"}}})";
  PacedCluster c({"--admin-token-file", dir + "/token", "--api-keys", dir + "/keys.json"});
  ASSERT_TRUE(c.router->ready());
  const std::string grpc_addr = c.router->fields()["grpc"];
  ChildProcess spare({Bin("bench/pace_node"), "--model", c.model, "--token-ms", "60000"}, "pace_node ready");
  const std::string spare_addr = spare.fields()["grpc"];
  const std::string token = "Bearer adm-0123456789abcdef";
  using grpc::StatusCode;
  EXPECT_EQ(RegisterNode(grpc_addr, "", "encoder", spare_addr), StatusCode::UNAUTHENTICATED);
  // A tenant's API key is no admin credential.
  EXPECT_EQ(RegisterNode(grpc_addr, "Bearer sk-tenant-0123456789", "encoder", spare_addr), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RegisterNode(grpc_addr, "Bearer adm-0123456789abcdeX", "encoder", spare_addr), StatusCode::UNAUTHENTICATED);
  // Addresses are checked, not dialled or logged as given.
  for (const char* bad : {"evil\nline:80", "host", "host:0", "host:70000", "dns:///svc:80", "a b:80", ""}) {
    EXPECT_EQ(RegisterNode(grpc_addr, token, "encoder", bad), StatusCode::INVALID_ARGUMENT) << bad;
  }
  EXPECT_EQ(RegisterNode(grpc_addr, token, "router", spare_addr), StatusCode::INVALID_ARGUMENT);
  // Nothing answers there: not added (a node proves its role first).
  EXPECT_EQ(RegisterNode(grpc_addr, token, "encoder", "127.0.0.1:1"), StatusCode::UNAVAILABLE);
  // The live decoder registered again as an encoder: refused, and it stays a healthy decoder.
  const std::string decoder_addr = c.decoder->fields()["grpc"];
  EXPECT_EQ(RegisterNode(grpc_addr, token, "encoder", decoder_addr), StatusCode::FAILED_PRECONDITION);
  // With the token, a node that answers as the role it names joins.
  EXPECT_EQ(RegisterNode(grpc_addr, token, "encoder", spare_addr), StatusCode::OK);
  const json health = json::parse(testing::HttpGet(c.http, "/health"));
  std::map<std::string, std::pair<std::string, std::string>> nodes;  // address -> role, state
  for (const json& n : health["nodes"]) nodes[n["address"]] = {n["role"], n["state"]};
  EXPECT_EQ(nodes[decoder_addr], std::make_pair(std::string("decoder"), std::string("healthy")));
  EXPECT_EQ(nodes[spare_addr], std::make_pair(std::string("encoder"), std::string("healthy")));
  EXPECT_EQ(nodes.count("127.0.0.1:1"), 0u);
}

// Per-tenant fairness (issue 45 item 4): tenant a floods (long streams, and new requests as fast as
// one client thread sends them) while tenant b measures its time to the first token, one request at
// a time. With a's share (max_running 8 of the router's 16) b's p99 stays within 1.5x of its value
// with a idle; without the share (the same flood, no "tenants" section) a takes every place and b is
// refused: the check that this test fails when the property breaks. The nodes are test doubles
// (first token after --token-ms): what is shared here is the router; node compute is not.
TEST(RouterAdmissionTest, OneTenantsFloodLeavesAnotherTenantsTtftAsUnloaded) {
  const std::string dir = testing::TempDir("fair");
  const std::string keys = R"({"ka-0123456789abcdef": {"tenant": "a"}, "kb-0123456789abcdef": {"tenant": "b"}})";
  std::ofstream(dir + "/shared.json") << R"({"keys": )" << keys << R"(, "tenants": {"a": {"max_running": 8}}})";
  std::ofstream(dir + "/open.json") << R"({"keys": )" << keys << "}";
  const std::string b_body = R"({"stream": true, "max_tokens": 1, "messages": [{"role": "user", "content": "b"}]})";
  const std::string a_body = R"({"stream": true, "max_tokens": 1000, "messages": [{"role": "user", "content": "a"}]})";
  // b's time to its first token (its only one: the stream's end follows it at once), `n` requests
  // one after another; -1 when one is not answered 200.
  auto b_ttft_p99 = [&](int port, int n) {
    double worst = 0;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      RawRequest r(port, b_body, "kb-0123456789abcdef");
      if (r.Head().substr(0, 12) != "HTTP/1.1 200" || !r.WaitFor("data: [DONE]")) return -1.0;
      worst = std::max(worst, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return worst;  // the p99 of 20 is their maximum
  };
  auto flood_and_measure = [&](const std::string& key_file, double* unloaded, int* a_admitted) {
    PacedCluster c({"--api-keys", key_file, "--max-running", "16"}, /*token_ms=*/100);
    EXPECT_TRUE(c.router->ready());
    *unloaded = b_ttft_p99(c.port, 20);
    std::vector<std::unique_ptr<RawRequest>> a_streams;
    *a_admitted = 0;
    for (int i = 0; i < 30; ++i) {
      a_streams.push_back(std::make_unique<RawRequest>(c.port, a_body, "ka-0123456789abcdef"));
      *a_admitted += a_streams.back()->Head().substr(0, 12) == "HTTP/1.1 200";
    }
    std::atomic<bool> stop{false};
    int flood = 0;
    // On one kept-alive connection (a new one only after an admitted stream), so the flood does not
    // fill the host's port space with closed connections.
    std::thread more([&] {
      auto conn = std::make_unique<RawRequest>(c.port, a_body, "ka-0123456789abcdef");
      for (; !stop.load(); ++flood) {
        if (conn->Head(std::chrono::seconds(2)).substr(0, 12) == "HTTP/1.1 429" && !conn->Body().empty()) {
          conn->Send(a_body);
        } else {
          conn = std::make_unique<RawRequest>(c.port, a_body, "ka-0123456789abcdef");
        }
      }
    });
    const double loaded = b_ttft_p99(c.port, 20);
    stop.store(true);
    more.join();
    std::cout << "tenant b's p99 time to first token: " << *unloaded << " ms alone, " << loaded << " ms while tenant a held "
              << *a_admitted << " streams and sent " << flood << " more requests (" << key_file << ")\n";
    return loaded;
  };
  double unloaded = 0;
  int a_admitted = 0;
  const double loaded = flood_and_measure(dir + "/shared.json", &unloaded, &a_admitted);
  EXPECT_EQ(a_admitted, 8);
  ASSERT_GT(unloaded, 0);
  EXPECT_GT(loaded, 0) << "b was refused while a flooded";
  EXPECT_LE(loaded, 1.5 * unloaded) << "b's p99 time to first token, ms: " << loaded << " flooded, " << unloaded << " alone";
  // The same flood without a's share: a holds all 16 places and b is refused.
  double open_unloaded = 0;
  EXPECT_EQ(flood_and_measure(dir + "/open.json", &open_unloaded, &a_admitted), -1.0);
  EXPECT_EQ(a_admitted, 16);
}

// A tenant over its tokens_per_minute is answered 429 with Retry-After and a message naming the
// limit; another tenant is served meanwhile, and the metrics say whose tokens and refusals these were.
TEST(RouterAdmissionTest, ATenantOverItsTokenRateIs429NamingTheLimit) {
  const std::string dir = testing::TempDir("rate");
  std::ofstream(dir + "/keys.json") << R"({"keys": {"kc-0123456789abcdef": {"tenant": "c"}, "kd-0123456789abcdef": {"tenant": "d"}},
    "tenants": {"c": {"tokens_per_minute": 30}}})";
  PacedCluster c({"--api-keys", dir + "/keys.json"}, /*token_ms=*/10);
  ASSERT_TRUE(c.router->ready());
  const std::string body = R"({"max_tokens": 2, "messages": [{"role": "user", "content": "a prompt of some tokens"}]})";
  int served = 0;
  std::string refused_head, refused_body;
  for (int i = 0; i < 10 && refused_head.empty(); ++i) {
    RawRequest r(c.port, body, "kc-0123456789abcdef");
    const std::string head = r.Head();
    if (head.substr(0, 12) == "HTTP/1.1 200") {
      ++served;
    } else {
      refused_head = head;
      refused_body = r.Body();
    }
  }
  EXPECT_GE(served, 1);
  ASSERT_EQ(refused_head.substr(0, 12), "HTTP/1.1 429") << refused_head;
  EXPECT_NE(refused_head.find("Retry-After: "), std::string::npos) << refused_head;
  EXPECT_NE(refused_body.find("tenant c is over its tokens_per_minute (30)"), std::string::npos) << refused_body;
  RawRequest other(c.port, body, "kd-0123456789abcdef");
  EXPECT_EQ(other.Head().substr(0, 12), "HTTP/1.1 200");
  // The gRPC front door refuses the same way: RESOURCE_EXHAUSTED, its Retry-After as trailing metadata.
  auto stub = router::v1::Router::NewStub(grpc::CreateChannel(c.router->fields()["grpc"], grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  router::v1::ApiRequest req;
  req.set_api_key("kc-0123456789abcdef");
  req.set_body_json(body);
  auto reader = stub->ChatCompletions(&ctx, req);
  router::v1::ApiChunk chunk;
  while (reader->Read(&chunk)) {
  }
  const grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("tenant c is over its tokens_per_minute (30)"), std::string::npos) << s.error_message();
  const auto& trailers = ctx.GetServerTrailingMetadata();
  const auto retry = trailers.find("retry-after");
  ASSERT_NE(retry, trailers.end());
  EXPECT_GE(std::stoi(std::string(retry->second.data(), retry->second.size())), 1);
  const std::string metrics = c.Metrics();
  EXPECT_NE(metrics.find(R"(ds41_router_tenant_rejections_total{reason="tokens_per_minute",tenant="c"} 2)"), std::string::npos);  // HTTP and gRPC
  EXPECT_NE(metrics.find(R"(ds41_router_tenant_tokens_total{kind="prompt",tenant="d"})"), std::string::npos);
  EXPECT_EQ(metrics.find("kc-0123456789abcdef"), std::string::npos);
}

// /metrics on a listener of its own (--metrics-listen): the API port no longer serves it, so a
// NetworkPolicy can admit scrapers and clients each to their own port.
TEST(RouterAdmissionTest, MetricsCanMoveOffTheApiPort) {
  PacedCluster c({"--metrics-listen", "127.0.0.1:0"});
  ASSERT_TRUE(c.router->ready());
  const std::string metrics_addr = c.router->fields()["metrics"];
  ASSERT_FALSE(metrics_addr.empty());
  EXPECT_NE(testing::HttpGet(metrics_addr, "/metrics").find("\nds41_router_running_requests 0"), std::string::npos);
  EXPECT_EQ(GetStatus(c.http, "/metrics"), 404);
  EXPECT_EQ(GetStatus(c.http, "/livez"), 200);
  EXPECT_EQ(GetStatus(metrics_addr, "/v1/models"), 404);  // and the API is not on the metrics port
}

TEST(RouterAdmissionTest, WithoutAnAdminTokenEveryAdminCallIsRefused) {
  PacedCluster c({});
  ASSERT_TRUE(c.router->ready());
  EXPECT_EQ(RegisterNode(c.router->fields()["grpc"], "Bearer anything-at-all-here", "encoder", c.encoder->fields()["grpc"]),
            grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace ds41
