// End-to-end tests of HttpServer over real sockets on 127.0.0.1.
#include "http/http_server.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "http/http_test_client.h"
#include "util/error_table.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {
namespace {

using namespace std::chrono_literals;
using testing::FormatRequest;
using testing::HttpTestClient;

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServer::Options opt = {}) {
    server_ = std::make_unique<HttpServer>(opt);
    server_->Handle("GET", "/hello", [](const HttpRequest&, std::shared_ptr<HttpResponder> r) {
      r->Send(200, "text/plain", "hello");
    });
    server_->Handle("POST", "/echo", [](const HttpRequest& req, std::shared_ptr<HttpResponder> r) {
      std::string ct(req.headers.Get("content-type").value_or("application/octet-stream"));
      r->Send(200, ct, req.body, HttpHeaders{{"X-Query", req.query}, {"X-Remote", req.remote_address}});
    });
    // Answers from another thread after a delay: proves pipelined responses keep request order.
    server_->Handle("GET", "/slow", [this](const HttpRequest&, std::shared_ptr<HttpResponder> r) {
      Spawn([r] {
        std::this_thread::sleep_for(50ms);
        r->Send(200, "text/plain", "slow");
      });
    });
    server_->Handle("GET", "/sse", [this](const HttpRequest&, std::shared_ptr<HttpResponder> r) {
      Spawn([r] {
        r->StartStream(200, "text/event-stream");
        for (int i = 0; i < 100; ++i) r->Write("data: " + std::to_string(i) + "\n\n");
        r->Finish();
      });
    });
    // A stream that never ends: only the client going away (or Stop) ends it.
    server_->Handle("GET", "/hang", [this](const HttpRequest&, std::shared_ptr<HttpResponder> r) {
      r->OnClose([this] { on_close_count_.fetch_add(1); });
      r->StartStream(200, "text/event-stream");
      r->Write("data: first\n\n");
      MutexLock lock(&mu_);
      hanging_.push_back(r);
    });
    // Writes until the write queue bound trips (the client never reads).
    server_->Handle("GET", "/flood", [this](const HttpRequest&, std::shared_ptr<HttpResponder> r) {
      r->OnClose([this] { on_close_count_.fetch_add(1); });
      Spawn([this, r] {
        r->StartStream(200, "application/octet-stream");
        std::string chunk(64 * 1024, 'x');
        int writes = 0;
        while (writes < 4000 && r->Write(chunk)) ++writes;
        flood_stopped_.store(!r->Write(chunk));
      });
    });
    ASSERT_TRUE(server_->Start().ok());
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }

  void Spawn(std::function<void()> fn) {
    MutexLock lock(&mu_);
    threads_.emplace_back(std::move(fn));
  }

  void TearDown() override {
    std::vector<std::thread> threads;
    {
      MutexLock lock(&mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
    if (server_) server_->Stop();
    server_.reset();
  }

  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 3000ms) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(2ms);
    }
    return pred();
  }

  void ExpectServerAlive() {
    HttpTestClient c;
    ASSERT_TRUE(c.Connect(port_));
    auto r = c.Request("GET", "/hello");
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello");
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  Mutex mu_;
  std::vector<std::thread> threads_ DS41_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<HttpResponder>> hanging_ DS41_GUARDED_BY(mu_);
  std::atomic<int> on_close_count_{0};
  std::atomic<bool> flood_stopped_{false};
};

TEST_F(HttpServerTest, GetAndPostRoundTrip) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  auto g = c.Request("GET", "/hello");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 200);
  EXPECT_EQ(g->body, "hello");
  EXPECT_EQ(g->headers.Get("content-type").value_or(""), "text/plain");

  auto p = c.Request("POST", "/echo?x=1&y=2", R"({"a":1})", "Content-Type: application/json\r\n");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, 200);
  EXPECT_EQ(p->body, R"({"a":1})");
  EXPECT_EQ(p->headers.Get("Content-Type").value_or(""), "application/json");
  EXPECT_EQ(p->headers.Get("X-Query").value_or(""), "x=1&y=2");
  EXPECT_EQ(p->headers.Get("X-Remote").value_or("").rfind("127.0.0.1:", 0), 0u);
}

TEST_F(HttpServerTest, KeepAliveServesTwoRequestsOnOneConnection) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  for (int i = 0; i < 2; ++i) {
    auto r = c.Request("POST", "/echo", "body" + std::to_string(i));
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, "body" + std::to_string(i));
    EXPECT_EQ(r->headers.Get("connection").value_or(""), "keep-alive");
  }
  EXPECT_EQ(server_->metrics().accepted_connections.load(), 1u);
}

TEST_F(HttpServerTest, PipelinedRequestsAnsweredInOrder) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  std::string batch = FormatRequest("GET", "/slow") + FormatRequest("POST", "/echo", "two") +
                      FormatRequest("GET", "/slow") + FormatRequest("GET", "/hello");
  ASSERT_TRUE(c.SendRaw(batch));
  std::vector<std::string> bodies;
  for (int i = 0; i < 4; ++i) {
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << i;
    bodies.push_back(r->body);
  }
  EXPECT_EQ(bodies, (std::vector<std::string>{"slow", "two", "slow", "hello"}));
}

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  auto r = c.Request("GET", "/nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->headers.Get("content-type").value_or(""), "application/json");
  EXPECT_NE(r->body.find(R"("error":{)"), std::string::npos);
  EXPECT_NE(r->body.find(R"("param":null)"), std::string::npos);
  EXPECT_NE(r->body.find(R"("code":"not_found")"), std::string::npos);

  auto m = c.Request("GET", "/echo");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 405);
  EXPECT_EQ(m->headers.Get("allow").value_or(""), "POST");
  EXPECT_NE(m->body.find("method_not_allowed"), std::string::npos);
}

TEST_F(HttpServerTest, TheServersOwnErrorsReadAsTheErrorTableSays) {
  StartServer();
  server_->Handle("GET", "/throws", [](const HttpRequest&, std::shared_ptr<HttpResponder>) {
    throw std::runtime_error("a bug");
  });
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  // A handler that throws: 500 with the table's type for it, as the API's own internal errors.
  auto r = c.Request("GET", "/throws");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  const nlohmann::json e = nlohmann::json::parse(r->body)["error"];
  EXPECT_EQ(e["type"], ErrorMappingOf(StatusCode::kInternal).openai_type);
  EXPECT_NE(e["message"].get<std::string>().find("a bug"), std::string::npos);
  auto nf = c.Request("GET", "/nope");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nlohmann::json::parse(nf->body)["error"]["type"], ErrorMappingOf(StatusCode::kNotFound).openai_type);
  // One the table has no row for (405) is the client's.
  auto m = c.Request("GET", "/echo");
  ASSERT_TRUE(m);
  EXPECT_EQ(nlohmann::json::parse(m->body)["error"]["type"], "invalid_request_error");
}

TEST_F(HttpServerTest, CustomErrorFormatterShapesRouterErrors) {
  server_ = std::make_unique<HttpServer>(
      HttpServer::Options{}, [](int status, std::string_view, std::string_view, std::string_view code) {
        return "{\"custom\":" + std::to_string(status) + ",\"c\":\"" + std::string(code) + "\"}";
      });
  ASSERT_TRUE(server_->Start().ok());
  port_ = server_->port();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  auto r = c.Request("GET", "/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, R"({"custom":404,"c":"not_found"})");
  ASSERT_TRUE(c.SendRaw("BROKEN\r\n\r\n"));
  auto bad = c.ReadResponse();
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->body, R"({"custom":400,"c":"bad_request"})");
}

TEST_F(HttpServerTest, MalformedRequestLineIs400AndServerStaysUp) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(c.SendRaw("G@T /hello HTTP/9.9 junk\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->headers.Get("connection").value_or(""), "close");
  EXPECT_TRUE(c.PeerClosed(2000ms));
  ExpectServerAlive();
}

TEST_F(HttpServerTest, HugeContentLengthIs413WithoutReadingBody) {
  HttpServer::Options opt;
  opt.max_body_bytes = 1024;
  StartServer(opt);
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(c.SendRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\nabc"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(c.PeerClosed(3000ms));

  // Chunked bodies have no length up front: the limit trips while reading.
  HttpTestClient d;
  ASSERT_TRUE(d.Connect(port_));
  std::string chunk(800, 'z');
  ASSERT_TRUE(d.SendRaw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n320\r\n" + chunk +
                        "\r\n320\r\n" + chunk + "\r\n"));
  auto r2 = d.ReadResponse();
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 413);
  ExpectServerAlive();
}

TEST_F(HttpServerTest, HeaderBombIs431) {
  // The server's own limit, well under http_parser's built-in 80 KiB overflow (which alone would
  // answer the bomb below with 431 too): 8 KiB of headers over a 4 KiB limit are refused, 3 KiB taken.
  {
    HttpServer::Options opt;
    opt.max_header_bytes = 4096;
    StartServer(opt);
    auto headers = [](int kib) {
      std::string h;
      for (int i = 0; i < kib * 16; ++i) h += "X-H" + std::to_string(100 + i) + ": " + std::string(56, 'h') + "\r\n";
      return h;
    };
    auto status_with = [&](int kib) {
      HttpTestClient c;
      if (!c.Connect(port_)) return -1;
      c.SendRaw("GET /hello HTTP/1.1\r\nHost: x\r\n" + headers(kib) + "\r\n");
      auto r = c.ReadResponse();
      return r ? r->status : -1;
    };
    EXPECT_EQ(status_with(8), 431);
    EXPECT_EQ(status_with(3), 200);
    server_->Stop();
    server_.reset();
  }
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  std::string req = "GET /hello HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 2000; ++i) req += "X-Bomb-" + std::to_string(i) + ": " + std::string(60, 'b') + "\r\n";
  req += "\r\n";
  c.SendRaw(req);  // may fail part-way once the server has answered and closed
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  ExpectServerAlive();
}

TEST_F(HttpServerTest, SlowHeadersTimeOutWith408) {
  HttpServer::Options opt;
  opt.header_timeout = 300ms;
  StartServer(opt);
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  const std::string req = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(200, 's') + "\r\n\r\n";
  auto start = std::chrono::steady_clock::now();
  for (char ch : req) {
    if (!c.SendRaw(std::string_view(&ch, 1))) break;  // server gave up on us
    std::this_thread::sleep_for(10ms);
    if (std::chrono::steady_clock::now() - start > 1000ms) break;
  }
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_TRUE(c.PeerClosed(2000ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3000ms);
  ExpectServerAlive();
}

TEST_F(HttpServerTest, SseHundredEventsFromAnotherThreadArriveInOrder) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  auto r = c.Request("GET", "/sse");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.Get("content-type").value_or(""), "text/event-stream");
  EXPECT_EQ(r->headers.Get("transfer-encoding").value_or(""), "chunked");
  std::string expected;
  for (int i = 0; i < 100; ++i) expected += "data: " + std::to_string(i) + "\n\n";
  EXPECT_EQ(r->body, expected);
  EXPECT_EQ(r->chunks.size(), 100u);
  // The connection is still usable afterwards.
  auto h = c.Request("GET", "/hello");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->body, "hello");
}

TEST_F(HttpServerTest, ClientDisconnectMidStreamFiresOnCloseOnce) {
  StartServer();
  {
    HttpTestClient c;
    ASSERT_TRUE(c.Connect(port_));
    ASSERT_TRUE(c.SendRaw(FormatRequest("GET", "/hang")));
    ASSERT_TRUE(WaitFor([&] {
      MutexLock lock(&mu_);
      return hanging_.size() == 1;
    }));
  }  // client closes
  ASSERT_TRUE(WaitFor([&] { return on_close_count_.load() == 1; }));
  std::shared_ptr<HttpResponder> r;
  {
    MutexLock lock(&mu_);
    r = hanging_[0];
  }
  EXPECT_TRUE(r->closed());
  EXPECT_FALSE(r->Write("data: late\n\n"));
  EXPECT_FALSE(r->Finish());
  bool late_fired = false;
  r->OnClose([&] { late_fired = true; });  // registering after the fact runs it at once
  EXPECT_TRUE(late_fired);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(on_close_count_.load(), 1);
  EXPECT_TRUE(WaitFor([&] { return server_->metrics().open_connections.load() == 0; }));
  EXPECT_EQ(server_->metrics().aborted_responses.load(), 1u);
}

TEST_F(HttpServerTest, SlowReaderOverflowClosesAndFiresOnClose) {
  HttpServer::Options opt;
  opt.max_write_queue_bytes = 1 << 20;
  StartServer(opt);
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(c.SendRaw(FormatRequest("GET", "/flood")));  // and never read
  ASSERT_TRUE(WaitFor([&] { return on_close_count_.load() == 1; }, 10000ms));
  ASSERT_TRUE(WaitFor([&] { return flood_stopped_.load(); }));
}

TEST_F(HttpServerTest, TwoHundredConcurrentConnectionsAllSucceed) {
  StartServer();
  constexpr int kN = 200;
  std::vector<std::unique_ptr<HttpTestClient>> clients;
  for (int i = 0; i < kN; ++i) {
    clients.push_back(std::make_unique<HttpTestClient>());
    ASSERT_TRUE(clients.back()->Connect(port_)) << i;
  }
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(clients[i]->SendRaw(FormatRequest("POST", "/echo", std::to_string(i * 7))));
  }
  ASSERT_TRUE(WaitFor([&] { return server_->metrics().open_connections.load() == kN; }));
  for (int i = 0; i < kN; ++i) {
    auto r = clients[i]->ReadResponse();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, std::to_string(i * 7));
  }
  EXPECT_EQ(server_->metrics().responses(2), static_cast<uint64_t>(kN));
}

TEST_F(HttpServerTest, ConnectionLimitAnswers503) {
  HttpServer::Options opt;
  opt.max_connections = 2;
  StartServer(opt);
  HttpTestClient a, b, c;
  ASSERT_TRUE(a.Connect(port_));
  ASSERT_TRUE(b.Connect(port_));
  ASSERT_TRUE(WaitFor([&] { return server_->metrics().open_connections.load() == 2; }));
  ASSERT_TRUE(c.Connect(port_));
  auto r = c.Request("GET", "/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  // The one error table's answer for 503: its type, and a Retry-After (the condition passes).
  EXPECT_EQ(r->headers.Get("retry-after").value_or(""), "1");
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["type"], "service_unavailable");
  EXPECT_EQ(server_->metrics().rejected_connections.load(), 1u);
  auto ok = a.Request("GET", "/hello");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, ConnectionCloseIsHonored) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  auto r = c.Request("GET", "/hello", {}, "Connection: close\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.Get("connection").value_or(""), "close");
  EXPECT_TRUE(c.PeerClosed(2000ms));
}

TEST_F(HttpServerTest, ExpectContinueAndChunkedRequestBody) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(c.SendRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  char buf[64];
  ssize_t n = ::recv(c.fd(), buf, sizeof(buf), 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.SendRaw("hello"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");

  ASSERT_TRUE(c.SendRaw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"));
  auto r2 = c.ReadResponse();
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->body, "abcdefg");

  ASSERT_TRUE(c.SendRaw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: teapot\r\n\r\n"));
  auto r3 = c.ReadResponse();
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->status, 417);
}

TEST_F(HttpServerTest, StopCancelsHangingStreamAfterGrace) {
  HttpServer::Options opt;
  opt.stop_grace = 200ms;
  StartServer(opt);
  HttpTestClient c, idle;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(idle.Connect(port_));
  ASSERT_TRUE(c.SendRaw(FormatRequest("GET", "/hang")));
  ASSERT_TRUE(WaitFor([&] {
    MutexLock lock(&mu_);
    return hanging_.size() == 1;
  }));
  auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2000ms);
  EXPECT_EQ(on_close_count_.load(), 1);
  EXPECT_TRUE(idle.PeerClosed(1000ms));
  MutexLock lock(&mu_);
  EXPECT_TRUE(hanging_[0]->closed());
  EXPECT_FALSE(hanging_[0]->Write("x"));
}

TEST_F(HttpServerTest, StopLetsInflightResponseFinish) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(c.SendRaw(FormatRequest("GET", "/slow")));
  std::this_thread::sleep_for(10ms);  // let the request be dispatched
  std::thread stopper([&] { server_->Stop(); });
  auto r = c.ReadResponse();
  stopper.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "slow");
}

TEST_F(HttpServerTest, OnlyHttp10And11AreServed) {
  StartServer();
  for (const char* version : {"HTTP/9.9", "HTTP/2.0", "HTTP/1.2", "HTTP/0.9"}) {
    HttpTestClient c;
    ASSERT_TRUE(c.Connect(port_));
    ASSERT_TRUE(c.SendRaw(std::string("GET /hello ") + version + "\r\nHost: x\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << version;
    EXPECT_EQ(r->status, 505) << version;
    EXPECT_EQ(r->headers.Get("connection").value_or(""), "close") << version;
  }
  for (const char* version : {"HTTP/1.0", "HTTP/1.1"}) {
    HttpTestClient c;
    ASSERT_TRUE(c.Connect(port_));
    ASSERT_TRUE(c.SendRaw(std::string("GET /hello ") + version + "\r\nHost: x\r\n\r\n"));
    auto r = c.ReadResponse();
    ASSERT_TRUE(r) << version;
    EXPECT_EQ(r->status, 200) << version;
  }
}

TEST_F(HttpServerTest, Http10StreamIsDelimitedByClose) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(c.SendRaw("GET /sse HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->headers.Has("transfer-encoding"));
  EXPECT_EQ(r->headers.Get("connection").value_or(""), "close");
  std::string expected;
  for (int i = 0; i < 100; ++i) expected += "data: " + std::to_string(i) + "\n\n";
  EXPECT_EQ(r->body, expected);
}

TEST_F(HttpServerTest, MetricsCountResponsesByClass) {
  StartServer();
  HttpTestClient c;
  ASSERT_TRUE(c.Connect(port_));
  ASSERT_TRUE(c.Request("GET", "/hello"));
  ASSERT_TRUE(c.Request("GET", "/missing"));
  ASSERT_TRUE(c.Request("GET", "/echo"));
  EXPECT_EQ(server_->metrics().responses(2), 1u);
  EXPECT_EQ(server_->metrics().responses(4), 2u);
  EXPECT_EQ(server_->metrics().open_connections.load(), 1);
  c.Close();
  EXPECT_TRUE(WaitFor([&] { return server_->metrics().open_connections.load() == 0; }));
}

TEST_F(HttpServerTest, StartFailsCleanlyOnBadHost) {
  HttpServer::Options opt;
  opt.host = "not-an-ip";
  HttpServer s(opt);
  EXPECT_FALSE(s.Start().ok());
  s.Stop();  // no threads were started: must not hang
}

TEST_F(HttpServerTest, RandomBytesFuzzNeverCrashes) {
  HttpServer::Options opt;
  opt.header_timeout = 200ms;
  opt.body_timeout = 200ms;
  StartServer(opt);
  std::mt19937 rng(4141);
  const std::vector<std::string> seeds = {
      FormatRequest("GET", "/hello"), FormatRequest("POST", "/echo", "payload"),
      "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "GET /sse HTTP/1.0\r\n\r\n", FormatRequest("GET", "/hello") + FormatRequest("GET", "/nope")};
  auto rnd = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  for (int iter = 0; iter < 3000; ++iter) {
    std::string data;
    if (iter % 4 == 0) {
      data.resize(1 + rnd(300));
      for (auto& ch : data) ch = static_cast<char>(rng());
    } else {
      data = seeds[rnd(seeds.size())];
      int edits = 1 + static_cast<int>(rnd(6));
      for (int e = 0; e < edits && !data.empty(); ++e) {
        switch (rnd(4)) {
          case 0: data[rnd(data.size())] = static_cast<char>(rng()); break;
          case 1: data.erase(rnd(data.size()), 1 + rnd(4)); break;
          case 2: data.insert(rnd(data.size()), 1 + rnd(3), static_cast<char>(rng())); break;
          case 3: data.resize(rnd(data.size() + 1)); break;
        }
      }
    }
    HttpTestClient c;
    ASSERT_TRUE(c.Connect(port_, 2000ms)) << iter;
    c.SendRaw(data);
    ::shutdown(c.fd(), SHUT_WR);
    // Read whatever comes until the server closes; what it says does not matter here.
    c.PeerClosed(iter % 50 == 0 ? 1000ms : 50ms);
  }
  ExpectServerAlive();
  // The corpus really reached the parser: plenty of requests were answered and plenty refused.
  EXPECT_GT(server_->metrics().responses(4), 300u);
  EXPECT_GT(server_->metrics().responses(2), 100u);
  EXPECT_TRUE(WaitFor([&] { return server_->metrics().open_connections.load() <= 1; }, 5000ms));
}

// Every status an error can be answered with (util/error_table.h) has its reason phrase.
TEST(HttpStatusReasonTest, EveryErrorTableStatusHasAReason) {
  for (const ErrorMapping& m : kErrorTable) EXPECT_NE(HttpStatusReason(m.http_status), "Unknown") << m.http_status;
}

}  // namespace
}  // namespace ds41
