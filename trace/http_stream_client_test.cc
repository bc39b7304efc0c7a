// The streaming client against a scripted loopback server: chunked bodies arrive piece by piece
// with their times, connections are reused, a stale pooled one is replaced, deadlines and
// abandoning close the connection, error bodies are kept.
#include "trace/http_stream_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "trace/scripted_http_server.h"

namespace ds41 {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using testing::Chunk;
using testing::ReadRequest;
using testing::ScriptedServer;
using testing::Write;

HttpCall Post(std::chrono::milliseconds timeout = 5000ms) {
  HttpCall c;
  c.path = "/v1/completions";
  c.body = "{}";
  c.headers = {{"x-session-id", "s1"}};
  c.deadline = Clock::now() + timeout;
  return c;
}

TEST(HttpStreamClientTest, ParsesUrls) {
  auto u = ParseHttpUrl("http://127.0.0.1:8300/v1/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8300);
  EXPECT_EQ(u->prefix, "/v1");
  u = ParseHttpUrl("http://router");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->prefix, "");
  EXPECT_FALSE(ParseHttpUrl("https://x:1").ok());
  EXPECT_FALSE(ParseHttpUrl("http://x:0").ok());
  EXPECT_FALSE(ParseHttpUrl("http://x:12a").ok());
  EXPECT_FALSE(ParseHttpUrl("http://:80").ok());
}

TEST(HttpStreamClientTest, ChunkedPiecesArriveTimedAndTheConnectionIsReused) {
  std::string seen_head;
  ScriptedServer server([&](int fd) {
    while (ReadRequest(fd, &seen_head)) {
      Write(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
      for (const char* piece : {"data: 1\n\n", "data: 2\n\n", "data: [DONE]\n\n"}) {
        std::this_thread::sleep_for(60ms);
        Write(fd, Chunk(piece));
      }
      Write(fd, "0\r\n\r\n");
    }
  });
  HttpStreamClient client(*ParseHttpUrl("http://127.0.0.1:" + std::to_string(server.port()) + "/api"));
  for (int call = 0; call < 2; ++call) {
    std::string body;
    std::vector<Clock::time_point> times;
    const Clock::time_point t0 = Clock::now();
    auto reply = client.Exchange(Post(), [&](std::string_view b, Clock::time_point t) {
      body.append(b);
      times.push_back(t);
      return true;
    });
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(body, "data: 1\n\ndata: 2\n\ndata: [DONE]\n\n");
    ASSERT_EQ(times.size(), 3u);  // one piece per read: the server paused between them
    EXPECT_GE(times[0] - t0, 50ms);
    EXPECT_GE(times[2] - times[1], 50ms);
  }
  EXPECT_EQ(server.accepted(), 1);  // kept alive and reused
  EXPECT_NE(seen_head.find("POST /api/v1/completions HTTP/1.1"), std::string::npos) << seen_head;
  EXPECT_NE(seen_head.find("x-session-id: s1"), std::string::npos);
  EXPECT_NE(seen_head.find("Content-Length: 2"), std::string::npos);
}

TEST(HttpStreamClientTest, AStalePooledConnectionIsReplaced) {
  // Answers one request per connection and then closes it without saying so.
  ScriptedServer server([](int fd) {
    if (ReadRequest(fd)) Write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  HttpStreamClient client(*ParseHttpUrl("http://127.0.0.1:" + std::to_string(server.port())));
  for (int call = 0; call < 3; ++call) {
    std::string body;
    auto reply = client.Exchange(Post(), [&](std::string_view b, Clock::time_point) {
      body.append(b);
      return true;
    });
    ASSERT_TRUE(reply.ok()) << call << ": " << reply.status().ToString();
    EXPECT_EQ(body, "ok");
    std::this_thread::sleep_for(20ms);  // the server's close lands before the next call
  }
  EXPECT_EQ(server.accepted(), 3);
}

TEST(HttpStreamClientTest, ErrorBodiesAreKept) {
  ScriptedServer server([](int fd) {
    if (ReadRequest(fd)) {
      Write(fd, "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 28\r\nRetry-After: 1\r\n\r\n{\"error\":{\"message\":\"full\"}}");
    }
  });
  HttpStreamClient client(*ParseHttpUrl("http://127.0.0.1:" + std::to_string(server.port())));
  bool sink_called = false;
  auto reply = client.Exchange(Post(), [&](std::string_view, Clock::time_point) { return sink_called = true; });
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->status, 429);
  EXPECT_EQ(reply->body, "{\"error\":{\"message\":\"full\"}}");
  EXPECT_FALSE(sink_called);
}

TEST(HttpStreamClientTest, DeadlineAndAbandonCloseTheConnection) {
  std::atomic<int> closed{0};
  ScriptedServer server([&](int fd) {
    if (!ReadRequest(fd)) return;
    Write(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunk("data: 1\n\n"));
    char c;
    if (::recv(fd, &c, 1, 0) == 0) ++closed;  // then nothing more: wait for the client to leave
  });
  HttpStreamClient client(*ParseHttpUrl("http://127.0.0.1:" + std::to_string(server.port())));
  const Clock::time_point t0 = Clock::now();
  int pieces = 0;
  auto late = client.Exchange(Post(300ms), [&](std::string_view, Clock::time_point) { return ++pieces > 0; });
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(pieces, 1);
  EXPECT_GE(Clock::now() - t0, 280ms);
  EXPECT_LT(Clock::now() - t0, 3s);
  auto gone = client.Exchange(Post(), [](std::string_view, Clock::time_point) { return false; });
  EXPECT_EQ(gone.status().code(), StatusCode::kCancelled);
  for (int i = 0; i < 100 && closed < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(closed, 2);
  EXPECT_EQ(server.accepted(), 2);  // neither connection went back to the pool
}

TEST(HttpStreamClientTest, NoServerIsUnavailable) {
  int port;
  {
    ScriptedServer gone([](int) {});
    port = gone.port();
  }
  HttpStreamClient client(*ParseHttpUrl("http://127.0.0.1:" + std::to_string(port)));
  auto r = client.Exchange(Post(), [](std::string_view, Clock::time_point) { return true; });
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

}  // namespace
}  // namespace ds41
