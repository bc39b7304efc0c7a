// The whole cluster as real processes on loopback — cache_service, two encoder nodes, two decoder
// nodes and the router — driven over HTTP and gRPC the way clients drive it (issue: router).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <future>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <set>
#include <thread>

#include "engine/engine.h"
#include "engine/loading/model.h"
#include "engine/sampling.h"
#include "http/http_test_client.h"
#include "router.grpc.pb.h"
#include "tests/support/child_process.h"
#include "rpc/transport_security.h"
#include "tests/support/test_checkpoint.h"
#include "tests/support/test_pki.h"
#include "util/process_metrics.h"

namespace ds41 {
namespace {

using nlohmann::json;
using testing::ChildProcess;

std::string Bin(const std::string& rel) { return testing::BinaryDir() + "/" + rel; }

int PortOf(const std::string& host_port) { return std::stoi(host_port.substr(host_port.rfind(':') + 1)); }

struct Cluster {
  std::string model = testing::SmallServingCheckpoint();
  std::string cache_dir = testing::TempDir("router-cache");
  std::unique_ptr<ChildProcess> cache;
  std::vector<std::unique_ptr<ChildProcess>> encoders, decoders;
  std::unique_ptr<ChildProcess> router;
  std::string cache_addr, enc_list, dec_list;
  int http_port = 0;
  std::string grpc_addr;
  std::vector<std::string> common;  // flags every process gets (e.g. TLS)

  static std::unique_ptr<ChildProcess> Start(std::vector<std::string> argv, const std::vector<std::string>& common,
                                             const std::string& marker = " ready ") {
    argv.insert(argv.end(), common.begin(), common.end());
    return std::make_unique<ChildProcess>(argv, marker);
  }

  explicit Cluster(std::vector<std::string> common_flags = {}) : common(std::move(common_flags)) {
    cache = Start({Bin("cache_service/cache_service"), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                   "--path", cache_dir},
                  common);
    cache_addr = cache->fields()["grpc"];
    for (int i = 0; i < 2; ++i) {
      encoders.push_back(Start({Bin("encoder_node/encoder_node"), "--model", model, "--listen", "127.0.0.1:0",
                                "--metrics-listen", "127.0.0.1:0", "--cache", cache_addr, "--threads", "1"},
                               common));
      enc_list += (i ? "," : "") + encoders.back()->fields()["grpc"];
      decoders.push_back(Start({Bin("decoder_node/decoder_node"), "--model", model, "--listen", "127.0.0.1:0",
                                "--metrics-listen", "127.0.0.1:0", "--cache", cache_addr, "--threads", "1"},
                               common));
      dec_list += (i ? "," : "") + decoders.back()->fields()["grpc"];
    }
  }

  void StartRouter(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {Bin("router/router"), "--model", model, "--listen", "127.0.0.1:0", "--grpc-listen",
                                     "127.0.0.1:0", "--encoders", enc_list, "--decoders", dec_list, "--cache", cache_addr,
                                     "--header-timeout-ms", "500"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    router = Start(argv, common, "router ready");
    ASSERT_TRUE(router->ready());
    http_port = PortOf(router->fields()["http"]);
    grpc_addr = router->fields()["grpc"];
  }

  testing::HttpTestResponse Post(const std::string& path, const json& body, const std::string& headers = "",
                                 std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    testing::HttpTestClient c;
    EXPECT_TRUE(c.Connect(http_port, timeout));
    auto r = c.Request("POST", path, body.dump(), "Content-Type: application/json\r\n" + headers);
    EXPECT_TRUE(r.has_value());
    return r.value_or(testing::HttpTestResponse{});
  }

  int Health() {
    testing::HttpTestClient c;
    if (!c.Connect(http_port)) return 0;
    auto r = c.Request("GET", "/health");
    return r ? r->status : 0;
  }
};

std::vector<int32_t> Ids(const json& j) { return j.get<std::vector<int32_t>>(); }

std::vector<int32_t> RandomTokens(int n, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = 20 + static_cast<int32_t>(rng() % 3000);
  return t;
}

// The single-process engine with the same CED semantics: continue `st` with the prompt's new
// tokens, then greedy decode until the end token or max_tokens.
std::vector<int32_t> Reference(const Model& m, SequenceState* st, const std::vector<int32_t>& prompt, int max_tokens) {
  Engine e(m);
  std::vector<float> lg;
  EXPECT_TRUE(e.CedPrefill(st, {prompt, {}, {}}, -1, &lg).ok());
  std::vector<int32_t> out;
  for (int i = 0; i < max_tokens; ++i) {
    out.push_back(Argmax(lg.data(), m.config().vocab_size));
    if (out.back() == 1 || i + 1 == max_tokens) break;
    EXPECT_TRUE(e.DecodeBatch({st}, {out.back()}, &lg).ok());
  }
  return out;
}

TEST(RouterClusterTest, AgentSessionHitsWholeContextSameBitsAndSurvivesRouterRestart) {
  Cluster c;
  c.StartRouter();
  auto model = std::move(Model::Open(c.model)).value();
  SequenceState ref = SequenceState::Create(model->config());
  std::vector<int32_t> ctx = RandomTokens(200, 1);
  int64_t prev_context = 0;  // what the model has processed at the end of the previous turn
  for (int turn = 0; turn < 4; ++turn) {
    if (turn == 3) c.StartRouter();  // a new router process: the store is the index
    auto r = c.Post("/v1/completions", {{"prompt", ctx}, {"max_tokens", 6}, {"temperature", 0}, {"return_token_ids", true}},
                    "x-session-id: agent-1\r\n");
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    const json& u = j["usage"];
    const auto out = Ids(j["choices"][0]["token_ids"]);
    EXPECT_EQ(Ids(j["choices"][0]["prompt_token_ids"]), ctx);
    EXPECT_EQ(out, Reference(*model, &ref, ctx, 6)) << "turn " << turn << " " << u.dump();
    EXPECT_EQ(u["prompt_cache_hit_tokens"].get<int64_t>(), prev_context) << "turn " << turn << " " << u.dump();
    EXPECT_EQ(u["prompt_cache_miss_tokens"].get<int64_t>(), static_cast<int64_t>(ctx.size()) - prev_context);
    // The encoder computes only the new tokens (plus a replay when the SWA state is gone).
    EXPECT_EQ(u["ds41"]["computed_tokens"].get<int64_t>(), static_cast<int64_t>(ctx.size()) - prev_context);
    if (turn > 0) {
      EXPECT_NE(u["ds41"]["swa_source"], "none");
    }
    EXPECT_EQ(u["ds41"]["decoder_replay_tokens"].get<int64_t>(), std::min<int64_t>(128, ctx.size()));
    // The next turn: the reply, then a tool result.
    ctx.insert(ctx.end(), out.begin(), out.end());
    prev_context = ref.length;
    EXPECT_EQ(prev_context, static_cast<int64_t>(ctx.size()) - 1);  // the last sampled token is not yet fed
    auto tool = RandomTokens(90 + 40 * turn, 10 + turn);
    ctx.insert(ctx.end(), tool.begin(), tool.end());
  }
}

std::string RouterMetricsText(const Cluster& c) {
  return testing::HttpGet("127.0.0.1:" + std::to_string(c.http_port), "/metrics");
}

TEST(RouterClusterTest, TenantsNeverSeeEachOthersHitsWorkOrSecrets) {
  Cluster c;
  const std::string keys = testing::TempDir("keys") + "/keys.json";
  // Distinctive keys and salts, to look for in every metrics page.
  std::ofstream(keys) << R"({"keys": {"sk-key-a-5ecret91": {"tenant": "a", "salt": "salt-a-7c2e"},
                              "sk-key-b-5ecret28": {"tenant": "b", "salt": "salt-b-4e61"}}})";
  c.StartRouter({"--api-keys", keys, "--max-sessions", "8"});
  const json body = {{"prompt", RandomTokens(300, 5)}, {"max_tokens", 2}, {"temperature", 0}};
  // The same session id for both: sessions, warm state and SWA snapshots are per tenant too.
  const std::string a = "Authorization: Bearer sk-key-a-5ecret91\r\nx-session-id: shared\r\n";
  const std::string b = "Authorization: Bearer sk-key-b-5ecret28\r\nx-session-id: shared\r\n";
  auto first = c.Post("/v1/completions", body, a);
  ASSERT_EQ(first.status, 200) << first.body;
  const json cold = json::parse(first.body)["usage"];
  // The same prompt again: its full units are cached (the turn's tail sits at its end, which a
  // request must still compute the last token of).
  json again;
  for (int i = 0; i < 50; ++i) {  // units land asynchronously
    again = json::parse(c.Post("/v1/completions", body, a).body);
    if (again["usage"]["prompt_cache_hit_tokens"] == 256) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(again["usage"]["prompt_cache_hit_tokens"], 256);
  // Tenant b sends the very same prompt: no hit, no warm session, no SWA state, and the same work as
  // a's cold request, so neither its usage nor its time to first token tells it a's prompts.
  const json other = json::parse(c.Post("/v1/completions", body, b).body)["usage"];
  EXPECT_EQ(other["prompt_cache_hit_tokens"], 0) << other.dump();
  EXPECT_EQ(other["ds41"]["prefix_source"], "none") << other.dump();
  EXPECT_EQ(other["ds41"]["swa_source"], cold["ds41"]["swa_source"]) << other.dump();
  EXPECT_EQ(other["ds41"]["computed_tokens"], cold["ds41"]["computed_tokens"]) << other.dump();
  EXPECT_EQ(other["ds41"]["decoder_replay_tokens"], cold["ds41"]["decoder_replay_tokens"]) << other.dump();
  auto none = c.Post("/v1/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(json::parse(none.body)["error"]["type"], "authentication_error");
  EXPECT_EQ(c.Post("/v1/completions", body, "Authorization: Bearer nope\r\n").status, 401);
  EXPECT_EQ(c.Post("/v1/completions", body, "Authorization: Bearer sk-key-a-5ecret9\r\n").status, 401);

  // One session id, two tenants: two sessions remembered.
  const std::string router_page = RouterMetricsText(c);
  EXPECT_NE(router_page.find("\nds41_router_sessions_bound 2\n"), std::string::npos) << router_page;
  EXPECT_NE(router_page.find("\nds41_router_sessions_bound_limit 8\n"), std::string::npos) << router_page;

  // No metrics page names a key or a salt (tenant names may appear; secrets never).
  std::vector<std::string> pages = {router_page, testing::HttpGet(c.cache->fields()["metrics"], "/metrics")};
  for (auto* group : {&c.encoders, &c.decoders}) {
    for (auto& n : *group) pages.push_back(testing::HttpGet(n->fields()["metrics"], "/metrics"));
  }
  for (const std::string& page : pages) {
    ASSERT_FALSE(page.empty());
    for (const char* secret : {"5ecret", "salt-a-7c2e", "salt-b-4e61"}) EXPECT_EQ(page.find(secret), std::string::npos);
  }
}

// A reply a client sends back is spliced from its record (the ids the model generated) only for the
// tenant that generated it: tenant b sending tenant a's reply, after the very same context, finds no
// record and its prompt is the reply's re-tokenized text (docs/security.md, docs/session_reuse.md).
TEST(RouterClusterTest, AReplyIsSplicedOnlyForTheTenantThatGeneratedIt) {
  Cluster c;
  const std::string keys = testing::TempDir("keys") + "/keys.json";
  std::ofstream(keys) << R"({"keys": {"key-a": {"tenant": "a", "salt": "sa"}, "key-b": {"tenant": "b", "salt": "sb"}}})";
  c.StartRouter({"--api-keys", keys});
  const std::string a = "Authorization: Bearer key-a\r\n", b = "Authorization: Bearer key-b\r\n";
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "List three files of the repository."}}})},
               {"max_tokens", 12},
               {"temperature", 0}};
  auto first = c.Post("/v1/chat/completions", body, a);
  ASSERT_EQ(first.status, 200) << first.body;
  body["messages"].push_back(json::parse(first.body)["choices"][0]["message"]);
  body["messages"].push_back({{"role", "user"}, {"content", "And the fourth?"}});
  body["max_tokens"] = 1;
  const auto splices = [&](const char* outcome) {
    return testing::Metric(RouterMetricsText(c), std::string("ds41_router_reply_splices_total{outcome=\"") + outcome + "\"}");
  };
  const double spliced0 = splices("spliced"), missed0 = splices("not_found");
  ASSERT_EQ(c.Post("/v1/chat/completions", body, b).status, 200);
  EXPECT_EQ(splices("spliced"), spliced0) << "tenant b was given tenant a's generated ids";
  EXPECT_EQ(splices("not_found"), missed0 + 1);
  ASSERT_EQ(c.Post("/v1/chat/completions", body, a).status, 200);  // the control: a's own reply is found
  EXPECT_EQ(splices("spliced"), spliced0 + 1);
}

// The same line in time (docs/security.md): tenant b's time to first token on prompts tenant a has
// cached is the time of cold prompts of the same length (medians of 8 each, interleaved), while a's
// own repeats are measurably faster, so this test would see a hit that leaked across tenants.
TEST(RouterClusterTest, ATenantsTimeOnAnotherTenantsCachedPromptIsACold) {
  Cluster c;
  const std::string keys = testing::TempDir("keys") + "/keys.json";
  std::ofstream(keys) << R"({"keys": {"sk-key-a-0123456789": {"tenant": "a"}, "sk-key-b-0123456789": {"tenant": "b"}}})";
  c.StartRouter({"--api-keys", keys});
  constexpr int kSamples = 8, kLength = 1200;
  auto timed = [&](const std::vector<int32_t>& prompt, const std::string& key, int64_t* hit) {
    static int session = 0;
    const std::string headers = "Authorization: Bearer " + key + "\r\nx-session-id: timing-" + std::to_string(++session) + "\r\n";
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c.Post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}}, headers);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 200) << r.body;
    *hit = r.status == 200 ? json::parse(r.body)["usage"]["prompt_cache_hit_tokens"].get<int64_t>() : -1;
    return ms;
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<std::vector<int32_t>> cached;
  int64_t hit = 0;
  for (int i = 0; i < kSamples; ++i) {
    cached.push_back(RandomTokens(kLength, 700 + i));
    timed(cached.back(), "sk-key-a-0123456789", &hit);
  }
  std::vector<double> a_again, b_cached, b_cold;
  for (int i = 0; i < kSamples; ++i) {
    // a's repeat, once its units have landed (asynchronously): the control.
    double ms = 0;
    for (int tries = 0; tries < 50; ++tries) {
      ms = timed(cached[static_cast<size_t>(i)], "sk-key-a-0123456789", &hit);
      if (hit > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GT(hit, kLength / 2);
    a_again.push_back(ms);
    b_cached.push_back(timed(cached[static_cast<size_t>(i)], "sk-key-b-0123456789", &hit));
    EXPECT_EQ(hit, 0);
    b_cold.push_back(timed(RandomTokens(kLength, 800 + i), "sk-key-b-0123456789", &hit));
    EXPECT_EQ(hit, 0);
  }
  const double cold = median(b_cold), other = median(b_cached), own = median(a_again);
  std::cout << "time to first token, medians of " << kSamples << ": b on a's cached prompts " << other << " ms, b cold " << cold
            << " ms, a's own repeats " << own << " ms\n";
  EXPECT_LT(own, 0.6 * cold) << "the control: a hit must show in time for this test to mean anything";
  EXPECT_GT(other, 0.8 * cold);
  EXPECT_LT(other, 1.25 * cold);
}

// "Label values are fixed vocabularies" (docs/security.md), checked on every page of a cluster after
// chat and completion requests carrying distinctive session ids, users, stop strings and message
// text: no label value holds any of it, and every label value is a short identifier. A label made
// from request data (a session id, a model name as sent, an error message) fails this.
TEST(RouterClusterTest, MetricLabelsAreFixedVocabulariesNeverRequestData) {
  Cluster c;
  c.StartRouter();
  for (int i = 0; i < 4; ++i) {
    const std::string tag = "probe" + std::to_string(7000 + i);
    const std::string headers = "x-session-id: session-" + tag + "\r\n";
    ASSERT_EQ(c.Post("/v1/completions", {{"prompt", RandomTokens(90, 40 + i)}, {"max_tokens", 2}, {"user", "user-" + tag},
                                         {"stop", json::array({"stop-" + tag})}},
                     headers)
                  .status,
              200);
    ASSERT_EQ(c.Post("/v1/chat/completions",
                     {{"messages", json::array({{{"role", "user"}, {"content", "text-" + tag}}})}, {"max_tokens", 2}}, headers)
                  .status,
              200);
    // Refused ones too: their errors are counted by code, never by message or field.
    EXPECT_EQ(c.Post("/v1/completions", {{"prompt", "x"}, {"model", "model-" + tag}}, headers).status, 404);
    EXPECT_EQ(c.Post("/v1/completions", {{"prompt", "x"}, {"field_" + tag, 1}}, headers).status, 400);
  }
  std::vector<std::string> pages = {RouterMetricsText(c), testing::HttpGet(c.cache->fields()["metrics"], "/metrics")};
  for (auto* group : {&c.encoders, &c.decoders})
    for (auto& n : *group) pages.push_back(testing::HttpGet(n->fields()["metrics"], "/metrics"));
  int values = 0;
  for (const std::string& page : pages) {
    ASSERT_FALSE(page.empty());
    EXPECT_EQ(page.find("probe"), std::string::npos);
    std::istringstream lines(page);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t open = line.find('{'), close = line.rfind('}');
      if (open == std::string::npos || close == std::string::npos) continue;
      // label="value",label="value": values are short identifiers (letters, digits and _.:/+-).
      const std::string labels = line.substr(open + 1, close - open - 1);
      for (size_t at = labels.find("=\""); at != std::string::npos; at = labels.find("=\"", at + 1)) {
        const size_t end = labels.find('"', at + 2);
        ASSERT_NE(end, std::string::npos) << line;
        const std::string value = labels.substr(at + 2, end - at - 2);
        ++values;
        EXPECT_LE(value.size(), 64u) << line;
        EXPECT_EQ(value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/+-"),
                  std::string::npos)
            << line;
        at = end;
      }
    }
  }
  EXPECT_GT(values, 100);  // the pages were read and labelled
}

TEST(RouterClusterTest, MetricsListenersRefuseOversizedRequestsAndStayUp) {
  Cluster c;
  // A request whose line and headers are `header_bytes` long, on a listener of each kind (a node's
  // and the cache's): its status, or 0 when the listener closed the connection instead.
  const auto status_of = [](const std::string& addr, size_t header_bytes) {
    testing::HttpTestClient h;
    if (!h.Connect(PortOf(addr))) return -1;
    std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: ";
    req += std::string(header_bytes - req.size() - 4, 'a') + "\r\n\r\n";
    h.SendRaw(req);  // may fail part way once the listener closes
    auto r = h.ReadResponse();
    return r ? r->status : 0;
  };
  for (const std::string& addr : {c.decoders[0]->fields()["metrics"], c.cache->fields()["metrics"]}) {
    SCOPED_TRACE(addr);
    // The limit is ours (kMetricsMaxRequestBytes, 16 KiB), not civetweb's default: a request under
    // it is served, one over it is refused or cut, never buffered without bound.
    EXPECT_EQ(status_of(addr, kMetricsMaxRequestBytes / 2), 200);
    const int over = status_of(addr, kMetricsMaxRequestBytes + 4096);
    EXPECT_TRUE(over == 0 || over >= 400) << over;
    {  // A flood of headers far over it.
      testing::HttpTestClient h;
      ASSERT_TRUE(h.Connect(PortOf(addr)));
      std::string flood = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
      for (int i = 0; i < 4096; ++i) flood += "X-Pad-" + std::to_string(i) + ": " + std::string(200, 'a') + "\r\n";
      h.SendRaw(flood);
      auto r = h.ReadResponse();
      EXPECT_TRUE(!r.has_value() || r->status >= 400) << r->status;
    }
  }
  // The listeners go on serving.
  EXPECT_NE(testing::HttpGet(c.decoders[0]->fields()["metrics"], "/metrics").find("ds41_decoder_"), std::string::npos);
  EXPECT_NE(testing::HttpGet(c.cache->fields()["metrics"], "/metrics").find("ds41_store_"), std::string::npos);
}

TEST(RouterClusterTest, MalformedRequestsGet4xxAndTheRouterStaysUp) {
  Cluster c;
  c.StartRouter({"--max-request-bytes", "1M"});
  const json ok_msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  struct Case {
    json body;
    int status;
  };
  const std::vector<Case> cases = {
      {json("not an object"), 400},
      {{{"messages", 5}}, 400},
      {{{"messages", json::array()}}, 400},
      {{{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}, 400},
      {{{"messages", ok_msgs}, {"temperature", "hot"}}, 400},
      {{{"messages", ok_msgs}, {"temperature", 7}}, 400},
      {{{"messages", ok_msgs}, {"max_tokens", -1}}, 400},
      {{{"messages", ok_msgs}, {"top_p", 0}}, 400},
      {{{"messages", ok_msgs}, {"stop", json::array({"a", "b", "c", "d", "e"})}}, 400},
      {{{"messages", ok_msgs}, {"stream", "yes"}}, 400},
      {{{"messages", ok_msgs}, {"n", 3}}, 400},
      {{{"messages", ok_msgs}, {"model", "gpt-4"}}, 404},
      {{{"messages", ok_msgs}, {"tools", "all"}}, 400},
  };
  for (const Case& k : cases) {
    auto r = c.Post("/v1/chat/completions", k.body);
    EXPECT_EQ(r.status, k.status) << k.body.dump() << " -> " << r.body;
    const json e = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(e.contains("error") && e["error"].contains("message") && e["error"].contains("type")) << r.body;
  }
  {
    testing::HttpTestClient h;
    ASSERT_TRUE(h.Connect(c.http_port));
    EXPECT_EQ(h.Request("POST", "/v1/chat/completions", "{\"messages\": [", "")->status, 400);  // bad JSON
  }
  {
    testing::HttpTestClient h;
    ASSERT_TRUE(h.Connect(c.http_port));
    std::string deep(100000, '[');
    EXPECT_EQ(h.Request("POST", "/v1/completions", deep, "")->status, 400);  // nesting bomb
  }
  {
    testing::HttpTestClient h;
    ASSERT_TRUE(h.Connect(c.http_port));
    ASSERT_TRUE(h.SendRaw("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9000000\r\n\r\n"));
    auto r = h.ReadResponse();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, 413);
  }
  {
    testing::HttpTestClient h;  // slow client: headers never finish
    ASSERT_TRUE(h.Connect(c.http_port));
    ASSERT_TRUE(h.SendRaw("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));
    EXPECT_TRUE(h.PeerClosed(std::chrono::milliseconds(5000)));
  }
  {
    testing::HttpTestClient h;
    ASSERT_TRUE(h.Connect(c.http_port));
    ASSERT_TRUE(h.SendRaw("GARBAGE\r\n\r\n"));
    auto r = h.ReadResponse();
    EXPECT_TRUE(!r.has_value() || r->status == 400);
  }
  {
    testing::HttpTestClient h;
    ASSERT_TRUE(h.Connect(c.http_port));
    EXPECT_EQ(h.Request("GET", "/v1/chat/completions")->status, 405);
    EXPECT_EQ(h.Request("GET", "/nope")->status, 404);
  }
  EXPECT_EQ(c.Health(), 200);
  auto good = c.Post("/v1/chat/completions", {{"messages", ok_msgs}, {"max_tokens", 3}});
  EXPECT_EQ(good.status, 200) << good.body;
}

TEST(RouterClusterTest, ADecoderThatDiesBeforeTheFirstTokenIsRoutedAround) {
  Cluster c;
  c.StartRouter({"--poll-ms", "600000"});  // the router learns of the death only from the failure
  c.decoders[0]->Kill(SIGKILL);
  const std::string dead = c.dec_list.substr(0, c.dec_list.find(','));
  int retried = 0;
  for (int i = 0; i < 16; ++i) {
    auto r = c.Post("/v1/completions", {{"prompt", RandomTokens(40, 100 + i)}, {"max_tokens", 2}});
    ASSERT_EQ(r.status, 200) << r.body;
    const json u = json::parse(r.body)["usage"]["ds41"];
    EXPECT_NE(u["decoder"], dead);
    retried += u["attempts"].get<int>() > 1;
  }
  EXPECT_EQ(retried, 1);  // once it failed, the node is known to be down
}

// An SSE response read as it arrives (one event per chunk, as the router writes them), with the
// arrival time of each event. Reading stops at the response's end, a close or reset, or a timeout.
struct SseReader {
  testing::HttpTestClient http;
  std::string raw;   // every byte received
  size_t parsed = 0;  // raw[0, parsed) has been split into events
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> events;  // payloads of "data: "
  bool ended = false;  // the chunked body's last chunk came
  int read_error = 0;  // errno of a failed recv (ECONNRESET: the connection was reset)

  bool Start(int port, const json& body, const std::string& headers, const std::string& path = "/v1/completions") {
    if (!http.Connect(port)) return false;
    const std::string b = body.dump();
    return http.SendRaw(testing::FormatRequest("POST", path, b, "Content-Type: application/json\r\n" + headers));
  }
  // Reads until `events` has `n` entries or the response is over; false on timeout.
  bool ReadUntil(size_t n, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (events.size() < n && !ended && read_error == 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pfd{http.fd(), POLLIN, 0};
      if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[8192];
      const ssize_t got = recv(http.fd(), buf, sizeof buf, 0);
      if (got < 0) read_error = errno;
      if (got <= 0) break;
      raw.append(buf, static_cast<size_t>(got));
      const auto now = std::chrono::steady_clock::now();
      for (size_t at; (at = raw.find("data: ", parsed)) != std::string::npos;) {
        const size_t stop = raw.find("\n\n", at);
        if (stop == std::string::npos) break;
        events.emplace_back(now, raw.substr(at + 6, stop - at - 6));
        parsed = stop + 2;
      }
      ended = raw.size() >= 5 && raw.compare(raw.size() - 5, 5, "0\r\n\r\n") == 0;
    }
    return events.size() >= n || ended;
  }
  // The completion's text from the events before [DONE], and its last chunk (with the usage) in
  // *last; an error event is a fatal failure.
  void Text(std::string* text, json* last) const {
    for (const auto& [at, payload] : events) {
      if (payload == "[DONE]") break;
      *last = json::parse(payload);
      ASSERT_FALSE(last->contains("error")) << payload;
      *text += (*last)["choices"][0]["text"].get<std::string>();
    }
  }
};


// Every role's pools are built at start (docs/architecture.md, "Threads"): 32 streams at once add
// no thread to any process, beyond gRPC's own (2 at most).
TEST(RouterClusterTest, EveryRolesThreadsStayFixedUnderConcurrentStreams) {
  Cluster c;
  c.StartRouter({"--max-queue-seconds", "0"});
  ASSERT_EQ(c.Post("/v1/completions", {{"prompt", RandomTokens(100, 1)}, {"max_tokens", 2}}).status, 200);
  std::vector<std::pair<std::string, pid_t>> roles = {{"cache", c.cache->pid()}, {"router", c.router->pid()}};
  for (size_t i = 0; i < 2; ++i) {
    roles.emplace_back("encoder" + std::to_string(i), c.encoders[i]->pid());
    roles.emplace_back("decoder" + std::to_string(i), c.decoders[i]->pid());
  }
  std::vector<int> idle;
  for (const auto& [name, pid] : roles) idle.push_back(testing::ThreadsOf(pid));
  std::vector<std::unique_ptr<SseReader>> streams;
  for (int i = 0; i < 32; ++i) {
    streams.push_back(std::make_unique<SseReader>());
    ASSERT_TRUE(streams.back()->Start(c.http_port, {{"prompt", RandomTokens(300, 100 + i)}, {"max_tokens", 48}, {"stream", true}}, ""));
  }
  // Every stream admitted and under way (its first token came), then counted while they run.
  for (auto& s : streams) ASSERT_TRUE(s->ReadUntil(1, std::chrono::seconds(60))) << s->raw;
  size_t running = 0;
  for (auto& s : streams) running += !s->ended;
  for (size_t r = 0; r < roles.size(); ++r) {
    const int now = testing::ThreadsOf(roles[r].second);
    EXPECT_LE(now, idle[r] + 2) << roles[r].first << ": " << idle[r] << " threads idle";
    std::printf("%s: %d threads idle, %d with %zu of 32 streams running\n", roles[r].first.c_str(), idle[r], now, running);
  }
  for (auto& s : streams) EXPECT_TRUE(s->ReadUntil(100000, std::chrono::seconds(120)) && s->ended);
}

// The decoder computing a sequence now (its running-sequences gauge), or -1.
int BusyDecoder(const Cluster& c) {
  for (size_t i = 0; i < c.decoders.size(); ++i) {
    const std::string m = testing::HttpGet(c.decoders[i]->fields()["metrics"], "/metrics");
    if (m.find("\nds41_decoder_running_sequences 1") != std::string::npos) return static_cast<int>(i);
  }
  return -1;
}

// Request migration (issue 28 item 3): the decoder streaming a greedy reply is killed with SIGKILL
// after some tokens; the router resumes the request on the other decoder and the client's stream
// goes on to the end, equal to a healthy run's reply (same prompt, another tenant so nothing is
// cached for it), nothing sent twice, usage coherent, the migration counted. Then the last decoder
// dies mid-stream: no migration is possible and the stream ends with an SSE error event and
// [DONE], a complete HTTP response (never a reset connection).
TEST(RouterClusterTest, ADecoderKilledMidStreamIsReplacedAndTheClientGetsTheWholeReply) {
  Cluster c;
  const std::string keys = testing::TempDir("keys") + "/keys.json";
  std::ofstream(keys) << R"({"keys": {"key-a": {"tenant": "a"}, "key-b": {"tenant": "b"}}})";
  c.StartRouter({"--api-keys", keys});
  const std::vector<int32_t> prompt = RandomTokens(200, 77);  // past the window: the replay start matters
  const int kMax = 160;
  const json body = {{"prompt", prompt}, {"max_tokens", kMax}, {"temperature", 0}, {"ignore_eos", true},
                     {"return_token_ids", true}};
  auto healthy = c.Post("/v1/completions", body, "Authorization: Bearer key-b\r\n", std::chrono::seconds(120));
  ASSERT_EQ(healthy.status, 200) << healthy.body;
  const std::string expect = json::parse(healthy.body)["choices"][0]["text"];
  const json expect_ids = json::parse(healthy.body)["choices"][0]["token_ids"];
  ASSERT_EQ(expect_ids.size(), static_cast<size_t>(kMax));

  json streamed_body = body;
  streamed_body["stream"] = true;
  SseReader sse;
  ASSERT_TRUE(sse.Start(c.http_port, streamed_body, "Authorization: Bearer key-a\r\nx-session-id: migrate-1\r\n"));
  ASSERT_TRUE(sse.ReadUntil(30, std::chrono::seconds(60))) << sse.raw;
  ASSERT_FALSE(sse.ended) << "the reply ended before the kill: " << sse.raw;
  const int busy = BusyDecoder(c);
  ASSERT_GE(busy, 0);
  const size_t events_before = sse.events.size();
  const auto killed_at = std::chrono::steady_clock::now();
  c.decoders[busy]->Kill(SIGKILL);
  ASSERT_TRUE(sse.ReadUntil(100000, std::chrono::seconds(120)));
  ASSERT_TRUE(sse.ended) << "errno " << sse.read_error << ": " << sse.raw.substr(sse.raw.size() > 2000 ? sse.raw.size() - 2000 : 0);
  EXPECT_EQ(sse.read_error, 0);
  // The client's view of the migration: the longest gap between events after the kill began.
  double stall = std::chrono::duration<double>(sse.events[events_before].first - killed_at).count();
  for (size_t i = events_before + 1; i + 2 < sse.events.size(); ++i) {
    stall = std::max(stall, std::chrono::duration<double>(sse.events[i].first - sse.events[i - 1].first).count());
  }
  std::string text;
  json last;
  ASSERT_NO_FATAL_FAILURE(sse.Text(&text, &last));
  EXPECT_EQ(sse.events.back().second, "[DONE]");
  EXPECT_EQ(text, expect);
  // Streamed with return_token_ids, the whole reply's ids come in the last chunk, migration or not.
  EXPECT_EQ(last["choices"][0]["token_ids"], expect_ids) << last.dump();
  const json& u = last["usage"];
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(u["prompt_tokens"], prompt.size());
  EXPECT_EQ(u["completion_tokens"], kMax);
  EXPECT_EQ(u["total_tokens"], prompt.size() + kMax);
  EXPECT_EQ(u["ds41"]["migrations"], 1) << u.dump();
  EXPECT_EQ(u["ds41"]["attempts"], 2) << u.dump();
  EXPECT_EQ(u["ds41"]["decoder"], c.decoders[1 - busy]->fields()["grpc"]) << u.dump();
  std::string metrics = RouterMetricsText(c);
  EXPECT_NE(metrics.find("ds41_router_migrations_total{outcome=\"completed\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("ds41_router_migration_stall_seconds_count 1"), std::string::npos) << metrics;
  const size_t sum_at = metrics.find("ds41_router_migration_stall_seconds_sum ");
  ASSERT_NE(sum_at, std::string::npos);
  const double router_stall = std::stod(metrics.substr(sum_at + std::strlen("ds41_router_migration_stall_seconds_sum ")));
  std::printf("migration: %zu events before the kill; the client saw its stream stand still %.3f s at most after it "
              "(the router measured %.3f s from the last token before to the first after)\n",
              events_before, stall, router_stall);

  // The last decoder dies mid-stream: nothing can resume the request.
  SseReader doomed;
  json doomed_body = streamed_body;
  doomed_body["prompt"] = RandomTokens(150, 78);
  ASSERT_TRUE(doomed.Start(c.http_port, doomed_body, "Authorization: Bearer key-a\r\n"));
  ASSERT_TRUE(doomed.ReadUntil(20, std::chrono::seconds(60))) << doomed.raw;
  ASSERT_FALSE(doomed.ended);
  c.decoders[1 - busy]->Kill(SIGKILL);
  ASSERT_TRUE(doomed.ReadUntil(100000, std::chrono::seconds(60)));
  EXPECT_TRUE(doomed.ended) << "errno " << doomed.read_error << ": " << doomed.raw;
  EXPECT_EQ(doomed.read_error, 0);
  ASSERT_GE(doomed.events.size(), 2u);
  EXPECT_EQ(doomed.events.back().second, "[DONE]");
  const json err = json::parse(doomed.events[doomed.events.size() - 2].second);
  ASSERT_TRUE(err.contains("error")) << err.dump();
  EXPECT_NE(err["error"]["message"].get<std::string>().find("no other could resume it"), std::string::npos) << err.dump();
  EXPECT_TRUE(err["error"].contains("type")) << err.dump();
  std::printf("no migration possible: the stream ended with %s\n", err.dump().c_str());
  metrics = RouterMetricsText(c);
  EXPECT_NE(metrics.find("ds41_router_migrations_total{outcome=\"refused\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("ds41_router_migrations_total{outcome=\"completed\"} 1"), std::string::npos) << metrics;
}

// Constrained decoding through a migration (issue 44 item 7): a greedy chat reply held to a JSON
// schema, its decoder killed mid-reply; the other decoder reads the streamed tokens into the
// grammar first and the client's content is the healthy run's, byte for byte (a grammar restarted
// from nothing would refuse the resumed tokens or write another document).
TEST(RouterClusterTest, AConstrainedReplyMigratedMidStreamKeepsItsGrammar) {
  Cluster c;
  const std::string keys = testing::TempDir("keys") + "/keys.json";
  std::ofstream(keys) << R"({"keys": {"key-a": {"tenant": "a"}, "key-b": {"tenant": "b"}}})";
  c.StartRouter({"--api-keys", keys});
  const json schema = {{"type", "object"},
                       {"properties", {{"notes", {{"type", "string"}}}, {"done", {{"type", "boolean"}}}}},
                       {"required", json::array({"notes", "done"})},
                       {"additionalProperties", false}};
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Write long notes on the repository, as JSON."}}})},
               {"max_tokens", 120},
               {"temperature", 0},
               {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "notes"}, {"schema", schema}}}}}};
  auto healthy = c.Post("/v1/chat/completions", body, "Authorization: Bearer key-b\r\n", std::chrono::seconds(120));
  ASSERT_EQ(healthy.status, 200) << healthy.body;
  const std::string expect = json::parse(healthy.body)["choices"][0]["message"]["content"];
  // json sorts the schema's keys, so "done" comes first; the free string then runs to max_tokens.
  ASSERT_EQ(expect.rfind("{\"done\":", 0), 0u) << expect;
  body["stream"] = true;
  SseReader sse;
  ASSERT_TRUE(sse.Start(c.http_port, body, "Authorization: Bearer key-a\r\nx-session-id: migrate-json\r\n", "/v1/chat/completions"));
  ASSERT_TRUE(sse.ReadUntil(25, std::chrono::seconds(60))) << sse.raw;
  ASSERT_FALSE(sse.ended) << "the reply ended before the kill (" << expect.size() << " bytes): " << expect;
  const int busy = BusyDecoder(c);
  ASSERT_GE(busy, 0);
  c.decoders[busy]->Kill(SIGKILL);
  ASSERT_TRUE(sse.ReadUntil(100000, std::chrono::seconds(120)));
  ASSERT_TRUE(sse.ended) << sse.raw;
  std::string content;
  json last;
  for (const auto& [at, payload] : sse.events) {
    if (payload == "[DONE]") break;
    last = json::parse(payload);
    ASSERT_FALSE(last.contains("error")) << payload;
    if (!last["choices"].empty()) content += last["choices"][0]["delta"].value("content", "");
  }
  EXPECT_EQ(content, expect);
  EXPECT_EQ(last["usage"]["ds41"]["migrations"], 1) << last.dump();
  std::printf("constrained reply through a migration: %zu bytes, equal to the healthy run's: %s\n", content.size(),
              content == expect ? "yes" : "no");
}

// A later turn of an agent session: its decoder, which also held the SWA state at the end of the
// previous turn, dies mid-stream. The first attempt's encoder kept the state it pulled from it, and
// the migrated attempt names that encoder, so its prefill is the first one's and the reply still
// equals a healthy run's (another tenant, the same two turns).
TEST(RouterClusterTest, ALaterTurnsDecoderKilledMidStreamStillGivesTheHealthyReply) {
  Cluster c;
  const std::string keys = testing::TempDir("keys") + "/keys.json";
  std::ofstream(keys) << R"({"keys": {"key-a": {"tenant": "a"}, "key-b": {"tenant": "b"}}})";
  // Sticky placement keeps a session's turns on one decoder (the cost policy may move it: a near tie
  // on this tiny model), which is the case under test.
  c.StartRouter({"--api-keys", keys, "--placement", "sticky"});
  const int kMax = 120;
  json turn2;                 // the second turn's body (the same for both tenants)
  std::string expect;         // tenant b's reply to it
  std::string turn1_decoder;  // tenant a's
  for (const char* key : {"key-b", "key-a"}) {
    const std::string auth = std::string("Authorization: Bearer ") + key + "\r\nx-session-id: agent\r\n";
    std::vector<int32_t> ctx = RandomTokens(200, 81);
    auto r1 = c.Post("/v1/completions", {{"prompt", ctx}, {"max_tokens", 8}, {"temperature", 0}, {"return_token_ids", true}},
                     auth, std::chrono::seconds(60));
    ASSERT_EQ(r1.status, 200) << r1.body;
    const json j1 = json::parse(r1.body);
    turn1_decoder = j1["usage"]["ds41"]["decoder"];
    const auto out = Ids(j1["choices"][0]["token_ids"]);
    ctx.insert(ctx.end(), out.begin(), out.end());
    const auto tool = RandomTokens(100, 82);
    ctx.insert(ctx.end(), tool.begin(), tool.end());
    turn2 = {{"prompt", ctx}, {"max_tokens", kMax}, {"temperature", 0}, {"ignore_eos", true}};
    if (std::string(key) == "key-b") {
      auto healthy = c.Post("/v1/completions", turn2, auth, std::chrono::seconds(60));
      ASSERT_EQ(healthy.status, 200) << healthy.body;
      expect = json::parse(healthy.body)["choices"][0]["text"];
    }
  }
  turn2["stream"] = true;
  SseReader sse;
  ASSERT_TRUE(sse.Start(c.http_port, turn2, "Authorization: Bearer key-a\r\nx-session-id: agent\r\n"));
  ASSERT_TRUE(sse.ReadUntil(30, std::chrono::seconds(60))) << sse.raw;
  ASSERT_FALSE(sse.ended);
  const int busy = BusyDecoder(c);
  ASSERT_GE(busy, 0);
  // The case this test is for: the session stayed on the decoder that holds its SWA state.
  ASSERT_EQ(c.decoders[busy]->fields()["grpc"], turn1_decoder);
  c.decoders[busy]->Kill(SIGKILL);
  ASSERT_TRUE(sse.ReadUntil(100000, std::chrono::seconds(60)));
  ASSERT_TRUE(sse.ended) << sse.raw;
  std::string text;
  json last;
  ASSERT_NO_FATAL_FAILURE(sse.Text(&text, &last));
  EXPECT_EQ(text, expect);
  const json& u = last["usage"];
  EXPECT_EQ(u["ds41"]["migrations"], 1) << u.dump();
  EXPECT_NE(u["ds41"]["swa_source"], "replay") << u.dump();
  EXPECT_GT(u["prompt_cache_hit_tokens"].get<int64_t>(), 200) << u.dump();
  EXPECT_EQ(u["completion_tokens"], kMax);
  std::printf("later turn migrated: SWA state from %s, cache hit %lld of %lld prompt tokens\n",
              u["ds41"]["swa_source"].get<std::string>().c_str(),
              static_cast<long long>(u["prompt_cache_hit_tokens"].get<int64_t>()),
              static_cast<long long>(u["prompt_tokens"].get<int64_t>()));
}

// --max-migrations 0: a decoder dying mid-stream ends the stream with the error event at once, though
// another decoder is healthy; the next request is served by that one.
TEST(RouterClusterTest, WithMigrationOffADecoderKilledMidStreamEndsTheStreamWithAnError) {
  Cluster c;
  c.StartRouter({"--max-migrations", "0"});
  const json body = {{"prompt", RandomTokens(120, 79)}, {"max_tokens", 160}, {"temperature", 0}, {"ignore_eos", true},
                     {"stream", true}};
  SseReader sse;
  ASSERT_TRUE(sse.Start(c.http_port, body, ""));
  ASSERT_TRUE(sse.ReadUntil(20, std::chrono::seconds(60))) << sse.raw;
  ASSERT_FALSE(sse.ended);
  const int busy = BusyDecoder(c);
  ASSERT_GE(busy, 0);
  c.decoders[busy]->Kill(SIGKILL);
  ASSERT_TRUE(sse.ReadUntil(100000, std::chrono::seconds(60)));
  EXPECT_TRUE(sse.ended) << "errno " << sse.read_error << ": " << sse.raw;
  ASSERT_GE(sse.events.size(), 2u);
  EXPECT_EQ(sse.events.back().second, "[DONE]");
  const json err = json::parse(sse.events[sse.events.size() - 2].second);
  ASSERT_TRUE(err.contains("error")) << err.dump();
  EXPECT_NE(err["error"]["message"].get<std::string>().find("migration is off (--max-migrations 0)"), std::string::npos)
      << err.dump();
  const std::string metrics = RouterMetricsText(c);
  EXPECT_NE(metrics.find("ds41_router_migrations_total{outcome=\"refused\"} 1"), std::string::npos) << metrics;
  auto next = c.Post("/v1/completions", {{"prompt", RandomTokens(30, 80)}, {"max_tokens", 2}});
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(json::parse(next.body)["usage"]["ds41"]["decoder"], c.decoders[1 - busy]->fields()["grpc"]);
}

TEST(RouterClusterTest, StopStringsCutTheReplyStreamedOrNot) {
  Cluster c;
  c.StartRouter();
  const json base = {{"prompt", "The cache holds the prefix of the session"}, {"max_tokens", 24}, {"temperature", 0}};
  auto full = c.Post("/v1/completions", base);
  ASSERT_EQ(full.status, 200) << full.body;
  const std::string text = json::parse(full.body)["choices"][0]["text"];
  ASSERT_GE(text.size(), 12u) << text;
  size_t at = text.size() / 2;  // three ASCII bytes from the middle on: a valid stop string
  while (at + 3 <= text.size() && !(text[at] > 0x20 && text[at + 1] > 0 && text[at + 2] > 0)) ++at;
  ASSERT_LE(at + 3, text.size()) << text;
  const std::string stop = text.substr(at, 3);
  const std::string expect = text.substr(0, text.find(stop));
  json req = base;
  req["stop"] = json::array({stop, "\x01never"});
  auto cut = c.Post("/v1/completions", req);
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(json::parse(cut.body)["choices"][0]["text"], expect);
  EXPECT_EQ(json::parse(cut.body)["choices"][0]["finish_reason"], "stop");
  // Streamed: the deltas concatenate to the same cut text.
  req["stream"] = true;
  auto sse = c.Post("/v1/completions", req);
  ASSERT_EQ(sse.status, 200);
  std::string streamed;
  size_t pos = 0;
  while ((pos = sse.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.body.find("\n\n", pos);
    const std::string payload = sse.body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") break;
    streamed += json::parse(payload)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(streamed, expect);
}

TEST(RouterClusterTest, GrpcApiStreamsTheSameOperations) {
  Cluster c;
  c.StartRouter();
  auto stub = ds41::router::v1::Router::NewStub(grpc::CreateChannel(c.grpc_addr, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    ds41::router::v1::ListModelsResponse resp;
    ASSERT_TRUE(stub->ListModels(&ctx, {}, &resp).ok());
    EXPECT_EQ(json::parse(resp.models_json())["data"][0]["id"], "deepseek-v4.1-flash");
  }
  grpc::ClientContext ctx;
  ds41::router::v1::ApiRequest req;
  req.set_body_json(json{{"messages", json::array({{{"role", "user"}, {"content", "hello"}}})}, {"max_tokens", 4}}.dump());
  auto reader = stub->ChatCompletions(&ctx, req);
  ds41::router::v1::ApiChunk chunk;
  json last;
  int n = 0;
  while (reader->Read(&chunk)) {
    last = json::parse(chunk.chunk_json());
    EXPECT_EQ(last["object"], "chat.completion.chunk");
    ++n;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_GE(n, 2);
  EXPECT_EQ(last["usage"]["completion_tokens"].get<int>() + last["usage"]["prompt_tokens"].get<int>(),
            last["usage"]["total_tokens"].get<int>());
  grpc::ClientContext bad_ctx;
  req.set_body_json("{]");
  auto bad = stub->ChatCompletions(&bad_ctx, req);
  while (bad->Read(&chunk)) {
  }
  EXPECT_EQ(bad->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Every hop over mutual TLS (router -> encoders/decoders -> cache, decoder -> encoder peers): the
// flags every binary takes, a session that hits its previous turn, and the router's gRPC API
// answering a client with the cluster's certificate but not a plaintext one.
TEST(RouterClusterTest, WholeClusterOverMutualTls) {
  const testing::TestPki pki = testing::MakeTestPki();
  ASSERT_FALSE(pki.dir.empty()) << "openssl failed";
  Cluster c({"--tls-cert", pki.cert, "--tls-key", pki.key, "--tls-ca", pki.ca, "--tls-server-name",
             testing::TestPki::kServerName});
  c.StartRouter();
  std::vector<int32_t> ctx = RandomTokens(150, 3);
  int64_t prev_context = 0;
  for (int turn = 0; turn < 2; ++turn) {
    auto r = c.Post("/v1/completions", {{"prompt", ctx}, {"max_tokens", 3}, {"temperature", 0}, {"return_token_ids", true}},
                    "x-session-id: tls-1\r\n");
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["usage"]["prompt_cache_hit_tokens"].get<int64_t>(), prev_context) << j["usage"].dump();
    const auto out = Ids(j["choices"][0]["token_ids"]);
    ctx.insert(ctx.end(), out.begin(), out.end());
    prev_context = static_cast<int64_t>(ctx.size()) - 1;  // the last sampled token is not yet fed
    auto tool = RandomTokens(70, 4 + turn);
    ctx.insert(ctx.end(), tool.begin(), tool.end());
  }
  TlsOptions o{pki.cert, pki.key, pki.ca, true, testing::TestPki::kServerName};
  auto security = std::move(TransportSecurity::Load(o)).value();
  grpc::ChannelArguments args;
  security.ApplyTo(&args);
  auto tls_stub = ds41::router::v1::Router::NewStub(grpc::CreateCustomChannel(c.grpc_addr, security.ChannelCredentials(), args));
  grpc::ClientContext ok_ctx;
  ds41::router::v1::ListModelsResponse models;
  EXPECT_TRUE(tls_stub->ListModels(&ok_ctx, {}, &models).ok());
  auto plain = ds41::router::v1::Router::NewStub(grpc::CreateChannel(c.grpc_addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext plain_ctx;
  plain_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  EXPECT_EQ(plain->ListModels(&plain_ctx, {}, &models).error_code(), grpc::StatusCode::UNAVAILABLE);
  // Every node and the cache refuse plaintext too: a channel without the cluster's certificate never
  // becomes ready where one with it does.
  std::vector<std::string> servers = {c.cache_addr};
  for (const auto* pool : {&c.encoders, &c.decoders})
    for (const auto& p : *pool) servers.push_back(p->fields()["grpc"]);
  for (const std::string& addr : servers) {
    SCOPED_TRACE(addr);
    // A loopback handshake takes milliseconds: a second is ample for either to connect.
    EXPECT_TRUE(grpc::CreateCustomChannel(addr, security.ChannelCredentials(), args)
                    ->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(3)));
    EXPECT_FALSE(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials())
                     ->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(1)));
  }
}

// Deadlines (issue 30 item 4): a prompt whose predicted first token falls after the client's deadline
// is refused at once with an OpenAI-shaped 504, not started; a malformed timeout header is a 400.
TEST(RouterClusterTest, APromptThatCannotMeetItsDeadlineIsRefusedUpFront) {
  Cluster c;
  c.StartRouter();
  const json body = {{"prompt", RandomTokens(3000, 3)}, {"max_tokens", 4}};  // predicted well over 50 ms
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.Post("/v1/completions", body, "x-request-timeout: 0.05\r\n");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_EQ(r.status, 504) << r.body;
  const json err = json::parse(r.body);
  EXPECT_EQ(err["error"]["type"], "timeout") << r.body;
  EXPECT_NE(err["error"]["message"].get<std::string>().find("predicted time to the first token"), std::string::npos) << r.body;
  auto bad = c.Post("/v1/completions", body, "x-stainless-timeout: soon\r\n");
  EXPECT_EQ(bad.status, 400) << bad.body;
  // With time enough (the official client's header), a prompt is served.
  auto ok = c.Post("/v1/completions", {{"prompt", RandomTokens(300, 4)}, {"max_tokens", 4}}, "x-stainless-timeout: 600\r\n");
  EXPECT_EQ(ok.status, 200) << ok.body;
  const std::string metrics = RouterMetricsText(c);
  EXPECT_NE(metrics.find("ds41_router_rejections_total{reason=\"deadline\"} 1"), std::string::npos) << metrics;
}

// Overload (issue 28 item 5): with both encoders busy on long prompts, a new request whose predicted
// wait behind that queued work exceeds --max-queue-seconds gets 429 with Retry-After at once, while
// the admitted ones complete.
TEST(RouterClusterTest, ARequestThatWouldQueueTooLongIsRefusedQuicklyWithRetryAfter) {
  Cluster c;
  c.StartRouter({"--max-queue-seconds", "0.2"});
  // 3,000 uncached tokens each: at the cost model's starting 4,000 tokens/s, 0.75 s queued per encoder.
  std::vector<std::future<testing::HttpTestResponse>> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(std::async(std::launch::async, [&c, i] {
      return c.Post("/v1/completions", {{"prompt", RandomTokens(3000, 40 + i)}, {"max_tokens", 2}}, "",
                    std::chrono::milliseconds(60000));
    }));
  }
  // Both placed (each encoder then has its queue, as the router counts what it sent): a fixed sleep
  // was not enough when other tests shared the CPU.
  auto placed = [&c] {
    double n = 0;
    std::istringstream lines(RouterMetricsText(c));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("ds41_router_placement_decisions_total{", 0) == 0) n += std::stod(line.substr(line.rfind(' ') + 1));
    return n;
  };
  const auto placed_by = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (placed() < 2 && std::chrono::steady_clock::now() < placed_by) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GE(placed(), 2) << "the two long prompts were not placed";
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = c.Post("/v1/completions", {{"prompt", RandomTokens(300, 50)}, {"max_tokens", 2}});
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_LT(took, std::chrono::milliseconds(500));
  const std::optional<std::string_view> retry_after = refused.headers.Get("retry-after");
  EXPECT_TRUE(retry_after.has_value());
  if (retry_after) {
    EXPECT_GE(std::stoi(std::string(*retry_after)), 1);
  }
  const json err = json::parse(refused.body);
  EXPECT_EQ(err.value("error", json::object()).value("type", ""), "rate_limit_error") << refused.body;
  EXPECT_NE(err.value("error", json::object()).value("message", "").find("predicted wait behind queued work"), std::string::npos);
  // Sent at once, the two went to different encoders: each placement saw the other's work (the
  // router once let both read the same idle loads and put them on one encoder).
  std::set<std::string> busy_encoders;
  for (auto& f : busy) {
    const testing::HttpTestResponse b = f.get();
    EXPECT_EQ(b.status, 200) << b.body;
    if (b.status == 200) busy_encoders.insert(json::parse(b.body)["usage"]["ds41"]["encoder"].get<std::string>());
  }
  EXPECT_EQ(busy_encoders.size(), 2u);
  const std::string metrics = RouterMetricsText(c);
  EXPECT_NE(metrics.find("ds41_router_rejections_total{reason=\"queue\"} 1"), std::string::npos) << metrics;
  // Once the queue drains, the same request is served.
  EXPECT_EQ(c.Post("/v1/completions", {{"prompt", RandomTokens(300, 50)}, {"max_tokens", 2}}).status, 200);
}

// A request whose deadline passes in the middle of its prefill (issue 30 items 1 and 2): the encoder
// stops at its next step and counts a deadline cancel, the whole units it had encoded are kept, and
// the same request sent again hits them and computes only the rest.
TEST(RouterClusterTest, ARequestPastItsDeadlineKeepsItsWorkAndItsRetryComputesTheRest) {
  Cluster c;
  c.StartRouter();
  const std::vector<int32_t> prompt = RandomTokens(5000, 11);
  const json body = {{"prompt", prompt}, {"max_tokens", 2}};
  const auto t0 = std::chrono::steady_clock::now();
  auto late = c.Post("/v1/completions", body, "x-request-timeout: 1.5\r\n");
  const double late_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(late.status, 504) << late.body;
  EXPECT_LT(late_s, 3.0);
  // The encoder drops the prefill at its next step (a step is up to 512 tokens: under a second here).
  auto deadline_cancels = [&] {
    int n = 0;
    for (const auto& e : c.encoders) {
      const std::string m = testing::HttpGet(e->fields()["metrics"], "/metrics");
      n += m.find("ds41_encoder_requests_cancelled_total{reason=\"deadline\"} 1") != std::string::npos;
    }
    return n;
  };
  for (int i = 0; i < 200 && deadline_cancels() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(deadline_cancels(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(8));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the kept units' background put
  auto retry = c.Post("/v1/completions", body, "", std::chrono::seconds(60));
  ASSERT_EQ(retry.status, 200) << retry.body;
  const json usage = json::parse(retry.body)["usage"];
  const int64_t hit = usage["prompt_cache_hit_tokens"];
  std::printf("retry after a deadline cancel at %.2f s: prompt_cache_hit_tokens %lld of %zu, computed %lld\n", late_s,
              static_cast<long long>(hit), prompt.size(), static_cast<long long>(usage["ds41"]["computed_tokens"].get<int64_t>()));
  EXPECT_GT(hit, 0);
  EXPECT_LT(hit, 5000);
  EXPECT_EQ(hit % 64, 0);
  EXPECT_EQ(usage["ds41"]["computed_tokens"], 5000 - hit);
}

// SIGTERM to the router (issue 30 item 3): it reports not ready, refuses new requests, lets the one in
// flight finish within the grace period and exits 0; with a short grace the rest is cancelled.
TEST(RouterClusterTest, SigtermDrainsThenCancelsWhatIsLeft) {
  Cluster c;
  for (const int grace : {30, 1}) {
    c.StartRouter({"--shutdown-grace-seconds", std::to_string(grace)});
    // With the long grace the reply finishes inside it, but only after the health and refusal checks
    // 1 s in (400 tokens once finished in 0.8 s, and the router was gone before they ran); with the
    // short grace it must still be running when the grace ends. About 1-3 ms a token here.
    const int max_tokens = grace == 30 ? 2000 : 5000;
    const json body = {{"prompt", RandomTokens(200, grace)}, {"max_tokens", max_tokens}, {"ignore_eos", true}};
    auto inflight = std::async(std::launch::async, [&] {
      return c.Post("/v1/completions", body, "", std::chrono::seconds(30));  // the whole grace
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(800));  // generating
    const auto term = std::chrono::steady_clock::now();
    auto exited = std::async(std::launch::async, [&] { return c.router->Kill(SIGTERM); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (grace == 30) {
      EXPECT_EQ(c.Health(), 503);
      auto refused = c.Post("/v1/completions", {{"prompt", RandomTokens(10, 9)}, {"max_tokens", 2}});
      EXPECT_EQ(refused.status, 503) << refused.body;
    }
    const testing::HttpTestResponse r = inflight.get();
    const int status = exited.get();
    const double exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - term).count();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    if (grace == 30) {
      EXPECT_EQ(r.status, 200) << r.body;  // finished in the grace period, every token
      EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], max_tokens) << r.body;
      EXPECT_LT(exit_s, 25);  // as soon as it was done, not at the end of the grace
    } else {
      EXPECT_LT(exit_s, 1 + 5);  // the grace, then a step
      // The router cancelled its call; the decoder stopped the sequence and says why.
      int cancelled = 0;
      for (const auto& d : c.decoders) {
        const std::string m = testing::HttpGet(d->fields()["metrics"], "/metrics");
        cancelled += m.find("ds41_decoder_requests_cancelled_total{reason=\"client\"} 1") != std::string::npos;
      }
      EXPECT_EQ(cancelled, 1);
    }
  }
}

}  // namespace
}  // namespace ds41
