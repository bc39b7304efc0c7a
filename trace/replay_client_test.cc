// The replay client against a scripted server speaking the router's streamed completions: the
// request it sends, the record it builds from chunks and usage, outcomes, the probe's advice, and
// the pool's bounded concurrency with TTFT counted from the scheduled arrival.
#include "trace/replay_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "trace/scripted_http_server.h"
#include "util/mutex.h"

namespace ds41 {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
using namespace std::chrono_literals;
using testing::Chunk;
using testing::ReadRequest;
using testing::ScriptedServer;
using testing::Write;

WorkloadRequest Request(int64_t index, double arrival, int64_t output = 3) {
  return {.index = index, .arrival_s = arrival, .prompt_tokens = 100, .output_tokens = output, .block_tokens = 64,
          .blocks = {0, 7}, .session = "s" + std::to_string(index)};
}

std::unique_ptr<ReplayClient> Client(int port, ReplayOptions o = {}) {
  o.endpoint = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  o.progress = false;
  auto c = ReplayClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

// A whole (non-streamed) response.
std::string Plain(const std::string& status, const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A streamed completion: `texts` as chunks `gap` apart, then the usage chunk and [DONE].
void Stream(int fd, const std::vector<std::string>& texts, std::chrono::milliseconds gap, const Json& usage) {
  Write(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (const std::string& t : texts) {
    std::this_thread::sleep_for(gap);
    Write(fd, Chunk("data: " + Json{{"object", "text_completion"}, {"choices", {{{"index", 0}, {"text", t}}}}}.dump() + "\n\n"));
  }
  Json last = {{"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}}}}, {"usage", usage}};
  Write(fd, Chunk("data: " + last.dump() + "\n\n") + Chunk("data: [DONE]\n\n") + "0\r\n\r\n");
}

Json Usage(int64_t completion, int64_t cached, const std::string& source) {
  return {{"prompt_tokens", 100},
          {"completion_tokens", completion},
          {"prompt_cache_hit_tokens", cached},
          {"ds41",
           {{"computed_tokens", 100 - cached},
            {"encoder_replay_tokens", 2},
            {"decoder_replay_tokens", 3},
            {"prefix_source", source},
            {"decoder", "d1"},
            {"encoder", "e0"},
            {"placement_reason", "cost"},
            {"ttft_seconds", 0.25},
            {"predicted_ttft_seconds", 0.125}}}};
}

TEST(ReplayClientTest, TheRequestBody) {
  auto c = Client(1);
  const WorkloadRequest w = Request(0, 0, 12);
  const Json b = Json::parse(c->Body(w));
  EXPECT_EQ(b["model"], "deepseek-v4.1-flash");
  EXPECT_EQ(b["prompt"].get<std::vector<int32_t>>(), WorkloadTokens(w, 16, 4096));
  EXPECT_EQ(b["max_tokens"], 12);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b["stream_options"]["include_usage"], true);
  EXPECT_EQ(b["ignore_eos"], true);
  EXPECT_EQ(b["temperature"], 0);
  EXPECT_FALSE(b.contains("seed"));
  const Json sampled = Json::parse(Client(1, {.temperature = 2, .seed = 7, .ignore_eos = false})->Body(w));
  EXPECT_EQ(sampled["seed"], 7);
  EXPECT_FALSE(sampled.contains("ignore_eos"));
  EXPECT_FALSE(ReplayClient::Create({.vocab = 10}).ok());  // 16 >= 10
  EXPECT_FALSE(ReplayClient::Create({.endpoint = "https://x"}).ok());
}

TEST(ReplayClientTest, AStreamBecomesARecord) {
  std::string head;
  ScriptedServer server([&](int fd) {
    if (ReadRequest(fd, &head)) Stream(fd, {"a", "b", "c"}, 40ms, Usage(3, 64, "cache"));
  });
  auto c = Client(server.port());
  const Clock::time_point start = Clock::now() - 1s;  // the request's arrival (0.5 s) was half a second ago
  const RequestRecord r = c->Send(Request(4, 0.5), start);
  EXPECT_NE(head.find("POST /v1/completions"), std::string::npos) << head;
  EXPECT_NE(head.find("x-session-id: s4"), std::string::npos);
  EXPECT_EQ(r.outcome, "ok") << r.error;
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.index, 4);
  EXPECT_EQ(r.session, "s4");
  EXPECT_EQ(r.completion_tokens, 3);
  EXPECT_EQ(r.cached_tokens, 64);
  EXPECT_EQ(r.computed_tokens, 36);
  EXPECT_EQ(r.encoder_replay_tokens, 2);
  EXPECT_EQ(r.decoder_replay_tokens, 3);
  EXPECT_EQ(r.kv_bytes_read, 64 * 890);
  EXPECT_EQ(r.decoder, "d1");
  EXPECT_EQ(r.encoder, "e0");
  EXPECT_EQ(r.placement_reason, "cost");
  EXPECT_EQ(r.router_ttft_s, 0.25);
  EXPECT_EQ(r.predicted_ttft_s, 0.125);
  EXPECT_GE(r.start_s, 0.99);
  // TTFT from the scheduled arrival: the half second before sending counts.
  EXPECT_GE(r.ttft_s, 0.53);
  EXPECT_LT(r.ttft_s, 1.5);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_GE(r.itl_s[0], 0.03);
  EXPECT_GE(r.e2e_s, r.ttft_s);
}

TEST(ReplayClientTest, Outcomes) {
  std::atomic<int> call{0};
  ScriptedServer server([&](int fd) {
    while (ReadRequest(fd)) {
      switch (call++) {
        case 0:
          Write(fd, Plain("429 Too Many Requests", R"({"error":{"message":"too many"}})"));
          break;
        case 1:
          Write(fd, Plain("503 Service Unavailable", "{}"));
          break;
        case 2:
          Write(fd, Plain("400 Bad Request", R"({"error":{"message":"nope"}})"));
          break;
        case 3:  // an error after the first chunk, as the router ends a failed stream
          Write(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
                        Chunk("data: {\"choices\":[{\"text\":\"x\"}]}\n\n") +
                        Chunk("data: {\"error\":{\"message\":\"decoder lost\"}}\n\n") + Chunk("data: [DONE]\n\n") +
                        "0\r\n\r\n");
          break;
        default:  // a stream without usage
          Write(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunk("data: [DONE]\n\n") + "0\r\n\r\n");
      }
    }
  });
  auto c = Client(server.port());
  const Clock::time_point now = Clock::now();
  RequestRecord r = c->Send(Request(0, 0), now);
  EXPECT_EQ(r.outcome, "rejected");
  EXPECT_EQ(r.http_status, 429);
  EXPECT_EQ(r.error, "too many");
  EXPECT_EQ(c->Send(Request(1, 0), now).outcome, "rejected");
  r = c->Send(Request(2, 0), now);
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.error, "nope");
  r = c->Send(Request(3, 0), now);
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.error, "decoder lost");
  EXPECT_GT(r.ttft_s, 0);  // its one token was timed
  r = c->Send(Request(4, 0), now);
  EXPECT_EQ(r.outcome, "failed");
  EXPECT_EQ(r.error, "the stream ended without a usage chunk");
  EXPECT_EQ(server.accepted(), 1);  // one kept-alive connection throughout
}

TEST(ReplayClientTest, DeadlinesAreTimeouts) {
  ScriptedServer server([&](int fd) {
    if (!ReadRequest(fd)) return;
    Write(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + Chunk("data: {\"choices\":[{\"text\":\"x\"}]}\n\n"));
    char b;
    (void)::recv(fd, &b, 1, 0);  // until the client leaves
  });
  auto c = Client(server.port(), {.deadline_s = 0.3});
  RequestRecord r = c->Send(Request(0, 0), Clock::now());
  EXPECT_EQ(r.outcome, "timeout");
  EXPECT_GE(r.e2e_s, 0.29);
  EXPECT_GT(r.ttft_s, 0);
  // Found past its deadline before it could be sent: never sent.
  r = c->Send(Request(1, 0), Clock::now() - 1s);
  EXPECT_EQ(r.outcome, "timeout");
  EXPECT_EQ(r.start_s, -1);
  EXPECT_EQ(server.accepted(), 1);
}

TEST(ReplayClientTest, ProbeSaysWhatToChange) {
  ScriptedServer server([](int fd) {
    if (ReadRequest(fd)) {
      Write(fd, Plain("400 Bad Request",
                      R"j({"error":{"message":"\"prompt\" token ids must be integers in [0, vocab size)","param":"prompt"}})j"));
    }
  });
  const Status s = Client(server.port(), {.vocab = 100000})->Probe();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--vocab"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[16, 100000)"), std::string::npos) << s.message();
}

TEST(ReplayClientTest, BoundedConcurrencyCountsQueueingInTtft) {
  // Each reply takes ~150 ms; 4 requests arrive at once on 2 client threads: two wait ~150 ms.
  std::atomic<int> in_flight{0}, most{0};
  Mutex mu;
  std::vector<std::thread> conns;
  auto serve = [&](int fd) {
    while (ReadRequest(fd)) {
      most = std::max(most.load(), ++in_flight);
      std::this_thread::sleep_for(150ms);
      --in_flight;
      Stream(fd, {"a"}, 0ms, Usage(1, 0, "none"));
    }
  };
  // Serve connections concurrently: the scripted server hands each to its own thread.
  ScriptedServer server([&](int fd) {
    const int dup = ::dup(fd);
    MutexLock l(&mu);
    conns.emplace_back([&, dup] {
      serve(dup);
      ::close(dup);
    });
  });
  auto c = Client(server.port(), {.concurrency = 2});
  std::vector<WorkloadRequest> w;
  for (int i = 0; i < 4; ++i) w.push_back(Request(i, 0.0, 1));
  auto records = RunReplay(*c, w, {.concurrency = 2, .progress = false}, nullptr);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), 4u);
  int waited = 0;
  for (size_t i = 0; i < 4; ++i) {
    const RequestRecord& r = (*records)[i];
    EXPECT_EQ(r.index, static_cast<int64_t>(i));
    EXPECT_EQ(r.outcome, "ok") << r.error;
    EXPECT_GE(r.ttft_s, 0.14);
    if (r.start_s - r.arrival_s > 0.1) {
      ++waited;
      EXPECT_GE(r.ttft_s, 0.29);  // its wait for a slot and its own reply
    }
  }
  EXPECT_EQ(waited, 2);
  EXPECT_LE(most.load(), 2);
  c.reset();  // closes the pooled connections, ending the serving threads
  MutexLock l(&mu);
  for (std::thread& t : conns) t.join();
}

}  // namespace
}  // namespace ds41
