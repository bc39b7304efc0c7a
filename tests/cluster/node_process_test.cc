// The node binaries as processes: an encoder killed mid-prefill, /metrics of both roles.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <future>
#include <random>
#include <thread>

#include "decoder_node/decoder_service.h"
#include "engine/config/presets.h"
#include "node.grpc.pb.h"
#include "rpc/server.h"
#include "node_client/node_client.h"
#include "node_client/node_protocol.h"
#include "cache_client/cache_client.h"
#include "tests/support/child_process.h"
#include "tests/support/test_checkpoint.h"

namespace ds41 {
namespace {

namespace pb = ds41::node::v1;

std::vector<int32_t> Tokens(int n, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = 3 + static_cast<int32_t>(rng() % 500);
  return t;
}

TEST(NodeProcessTest, EncoderKilledMidPrefillGivesUnavailableAndNoStrandedState) {
  auto model = std::move(Model::Open(testing::TinyCheckpoint())).value();
  // One token per encoder step makes a 2,000-token prefill take long enough to be killed inside it.
  testing::ChildProcess enc({testing::BinaryDir() + "/encoder_node/encoder_node", "--model", testing::TinyCheckpoint(),
                             "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--step-tokens", "1", "--threads",
                             "1"},
                            "encoder_node ready");
  ASSERT_TRUE(enc.ready());
  const std::string enc_addr = enc.fields()["grpc"];
  NodeClient encoders(std::make_shared<ChannelSet>(), model->fingerprint());
  prometheus::Registry reg;
  NodeMetrics metrics(reg, "decoder");
  ThreadPool pool(2);
  const std::string fp = model->fingerprint();
  DecoderCore core(
      *model, nullptr,
      PrefillThrough(&encoders), DecoderOptions{}, &metrics, NodeExecutors{&pool, &pool, nullptr});
  const uint64_t baseline = core.ResidentBytes();

  GenerateInput in;
  in.ns = NamespaceRoot(*ParseFingerprint(fp), kUnitFormatVersion, "t");
  in.tokens = Tokens(2000, 1);
  in.encoder = enc_addr;
  in.session_id = "s";
  in.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto start = std::chrono::steady_clock::now();
  auto fut = std::async(std::launch::async, [&] { return core.Generate(in); });
  // Kill as soon as the request waits on the encoder (2,000 one-token steps take far longer).
  while (core.waiting() == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(core.waiting(), 1);  // still inside the prefill
  enc.Kill(SIGKILL);
  std::shared_ptr<TokenStream> stream = fut.get();
  std::vector<int32_t> toks;
  EXPECT_TRUE(stream->Pop(&toks, std::chrono::milliseconds(10)));
  EXPECT_EQ(stream->status().code(), StatusCode::kUnavailable) << stream->status().ToString();
  EXPECT_TRUE(toks.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(core.running(), 0);
  EXPECT_EQ(core.waiting(), 0);
  EXPECT_EQ(core.ResidentBytes(), baseline);
  EXPECT_TRUE(core.WarmSessions().empty());
  EXPECT_EQ(metrics.requests_unavailable.Value(), 1);
}

TEST(NodeProcessTest, BothRolesServeMetrics) {
  const std::string ckpt = testing::TinyCheckpoint();
  testing::ChildProcess enc({testing::BinaryDir() + "/encoder_node/encoder_node", "--model", ckpt, "--listen", "127.0.0.1:0",
                             "--metrics-listen", "127.0.0.1:0"},
                            "encoder_node ready");
  ASSERT_TRUE(enc.ready());
  testing::ChildProcess dec({testing::BinaryDir() + "/decoder_node/decoder_node", "--model", ckpt, "--listen", "127.0.0.1:0",
                             "--metrics-listen", "127.0.0.1:0", "--expert-cache", "1M"},
                            "decoder_node ready");
  ASSERT_TRUE(dec.ready());
  auto model = std::move(Model::Open(ckpt)).value();
  GenerateInput in;
  in.ns.fill('n');
  in.tokens = Tokens(40, 2);
  in.encoder = enc.fields()["grpc"];
  in.sampling.max_tokens = 6;
  in.unit_tokens = 32;
  NodeClient client(std::make_shared<ChannelSet>(), model->fingerprint());
  int n = 0;
  const GenerateCallResult call = client.Generate(dec.fields()["grpc"], in, nullptr, [&](const GeneratedTokens& got_ids) {
    const std::vector<int32_t>& ids = got_ids.ids;
    n += static_cast<int>(ids.size());
    return true;
  });
  ASSERT_TRUE(call.status.ok()) << call.status.ToString();
  EXPECT_EQ(n, 6);
  const std::string em = testing::HttpGet(enc.fields()["metrics"], "/metrics");
  const std::string dm = testing::HttpGet(dec.fields()["metrics"], "/metrics");
  for (const char* name : {"ds41_encoder_computed_tokens_total{kind=\"new\"} 40", "ds41_encoder_prefill_seconds_count 1",
                           "ds41_encoder_swa_state_total{source=\"none\"} 1", "ds41_encoder_kv_transfer_bytes_total"})
    EXPECT_NE(em.find(name), std::string::npos) << name;
  for (const char* name : {"ds41_decoder_generated_tokens_total 6", "ds41_decoder_ttft_seconds_count 1",
                           "ds41_decoder_computed_tokens_total{kind=\"replay\"} 16", "ds41_decoder_expert_cache_misses_total",
                           "ds41_decoder_resident_bytes{kind=\"expert_cache\"}", "ds41_decoder_running_sequences",
                           "ds41_decoder_decode_step_seconds_count 5"})
    EXPECT_NE(dm.find(name), std::string::npos) << name;
}

// decoder_node --speculative (issue 27) on a checkpoint with DSpark layers: the same greedy reply
// as a plain decoder_node, its steps counted in the speculation metrics.
TEST(NodeProcessTest, ASpeculativeDecoderRepliesAsAPlainOne) {
  const std::string ckpt = testing::WriteTestCheckpoint(TinyDsparkConfig(), 1, "process-dspark");
  testing::ChildProcess enc({testing::BinaryDir() + "/encoder_node/encoder_node", "--model", ckpt, "--listen", "127.0.0.1:0",
                             "--metrics-listen", "127.0.0.1:0"},
                            "encoder_node ready");
  ASSERT_TRUE(enc.ready());
  auto decoder = [&](bool speculative) {
    std::vector<std::string> args = {testing::BinaryDir() + "/decoder_node/decoder_node", "--model", ckpt, "--listen",
                                     "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"};
    if (speculative) args.push_back("--speculative");
    return std::make_unique<testing::ChildProcess>(args, "decoder_node ready");
  };
  auto plain = decoder(false), spec = decoder(true);
  ASSERT_TRUE(plain->ready());
  ASSERT_TRUE(spec->ready());
  auto model = std::move(Model::Open(ckpt)).value();
  NodeClient client(std::make_shared<ChannelSet>(), model->fingerprint());
  auto reply = [&](testing::ChildProcess* dec) {
    GenerateInput in;
    in.ns.fill('s');
    in.tokens = Tokens(30, 3);
    in.encoder = enc.fields()["grpc"];
    in.sampling.max_tokens = 20;
    in.unit_tokens = 32;
    std::vector<int32_t> out;
    const GenerateCallResult call = client.Generate(dec->fields()["grpc"], in, nullptr, [&](const GeneratedTokens& got_ids) {
      const std::vector<int32_t>& ids = got_ids.ids;
      out.insert(out.end(), ids.begin(), ids.end());
      return true;
    });
    EXPECT_TRUE(call.status.ok()) << call.status.ToString();
    return out;
  };
  const std::vector<int32_t> a = reply(plain.get()), b = reply(spec.get());
  EXPECT_EQ(a.size(), 20u);
  EXPECT_EQ(a, b);
  const std::string pm = testing::HttpGet(plain->fields()["metrics"], "/metrics");
  const std::string sm = testing::HttpGet(spec->fields()["metrics"], "/metrics");
  EXPECT_NE(pm.find("ds41_decoder_spec_verify_length_count 0"), std::string::npos);
  EXPECT_EQ(sm.find("ds41_decoder_spec_verify_length_count 0"), std::string::npos);
  EXPECT_NE(sm.find("ds41_decoder_spec_position_accepted_total{position=\"1\"}"), std::string::npos);
  EXPECT_NE(sm.find("ds41_decoder_generated_tokens_total 20"), std::string::npos);
}

// What a caller that gives up leaves behind (issue 30): the encoder drops the prefill before its next
// shared step, counts it, keeps the whole units it had encoded, and a retry computes only the rest.
TEST(NodeProcessTest, ACancelledPrefillStopsAtTheNextStepAndKeepsItsUnits) {
  auto model = std::move(Model::Open(testing::TinyCheckpoint())).value();
  const std::string fp = model->fingerprint();
  testing::ChildProcess cache({testing::BinaryDir() + "/cache_service/cache_service", "--listen", "127.0.0.1:0",
                               "--metrics-listen", "127.0.0.1:0", "--path", testing::TempDir("cancel-cache")},
                              "cache_service ready");
  ASSERT_TRUE(cache.ready());
  const std::string cache_addr = cache.fields()["grpc"];
  // One token a step makes a 4,000-token prefill take seconds; the retry goes to a second encoder
  // with the default step, as a router would place it.
  constexpr int kPrompt = 4000;
  testing::ChildProcess enc({testing::BinaryDir() + "/encoder_node/encoder_node", "--model", testing::TinyCheckpoint(),
                             "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--cache", cache_addr,
                             "--step-tokens", "1", "--threads", "1"},
                            "encoder_node ready");
  testing::ChildProcess enc2({testing::BinaryDir() + "/encoder_node/encoder_node", "--model", testing::TinyCheckpoint(),
                              "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--cache", cache_addr,
                              "--threads", "1"},
                             "encoder_node ready");
  ASSERT_TRUE(enc.ready());
  ASSERT_TRUE(enc2.ready());
  const std::string enc_addr = enc.fields()["grpc"];
  NodeClient client(std::make_shared<ChannelSet>(), fp);
  auto running = [&] {
    auto st = client.Status(NodeRole::kEncoder, enc_addr, std::chrono::seconds(2));
    return st.ok() ? st->running : -1;
  };

  PrefillInput in;
  in.ns = NamespaceRoot(*ParseFingerprint(fp), kUnitFormatVersion, "t");
  in.tokens = Tokens(kPrompt, 5);
  in.unit_tokens = 32;
  CancelToken cancel;
  auto call = std::async(std::launch::async, [&] {
    return client.Prefill(enc_addr, in, std::chrono::steady_clock::now() + std::chrono::seconds(60), &cancel);
  });
  // Cancel once two units' worth is computed, however fast this machine is: a fixed sleep let a
  // faster engine finish the whole prompt before the cancel came.
  auto remaining = [&] {
    auto st = client.Status(NodeRole::kEncoder, enc_addr, std::chrono::seconds(2));
    return st.ok() && st->running == 1 ? st->queued_tokens : int64_t{-1};
  };
  const auto start = std::chrono::steady_clock::now();
  int64_t left = remaining();
  while ((left < 0 || left > kPrompt - 2 * in.unit_tokens) &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    left = remaining();
  }
  ASSERT_GT(left, kPrompt / 2) << "the prefill should still be early when it is cancelled";
  cancel.Cancel();
  const StatusOr<PrefillOutput> out = call.get();
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled) << out.status().ToString();

  // Dropped at the next step: the slot is free well within a second.
  const auto cancelled_at = std::chrono::steady_clock::now();
  while (running() != 0 && std::chrono::steady_clock::now() - cancelled_at < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(running(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled_at, std::chrono::seconds(1));
  // The outcome is counted once the prefill's answer is sent, after its encoded units are built (on
  // the encoder's request threads, a moment after the slot freed).
  std::string metrics = testing::HttpGet(enc.fields()["metrics"], "/metrics");
  for (int i = 0; i < 250 && metrics.find("ds41_encoder_requests_total{status=\"cancelled\"} 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    metrics = testing::HttpGet(enc.fields()["metrics"], "/metrics");
  }
  EXPECT_NE(metrics.find("ds41_encoder_requests_total{status=\"cancelled\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("ds41_encoder_requests_cancelled_total{reason=\"client\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("ds41_encoder_requests_cancelled_total{reason=\"deadline\"} 0"), std::string::npos) << metrics;

  // The whole units it encoded are in the store (written in the background).
  CacheClientOptions co;
  co.shards = {cache_addr};
  auto store = std::move(CacheClient::Create(co)).value();
  const CacheNamespace ns{in.ns, fp, kUnitFormatVersion};
  const std::vector<int32_t> head(in.tokens.begin(), in.tokens.end() - 1);
  int64_t H = 0;
  for (int i = 0; i < 250 && H == 0; ++i) {
    H = store->LookupPrefix(ns, head, in.unit_tokens).tokens;
    if (H == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(H, 0);
  EXPECT_LE(H, kPrompt / 2);  // cut off early: a prefill run to its end would have stored 3,968
  EXPECT_EQ(H % in.unit_tokens, 0);

  // A retry of the same prompt computes only what is left.
  in.cached_tokens = H;
  const StatusOr<PrefillOutput> again =
      client.Prefill(enc2.fields()["grpc"], in, std::chrono::steady_clock::now() + std::chrono::seconds(120));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->cached_tokens, H);
  EXPECT_EQ(again->computed_tokens, kPrompt - H);
}

// SIGTERM in the middle of a long prefill (issue 30): the server's shutdown cancels the call when the
// grace period ends, the core drops the prefill at its next step, and the process exits in bounded
// time instead of computing to the end.
TEST(NodeProcessTest, EncoderExitsOnSigtermInTheMiddleOfALongPrefill) {
  auto model = std::move(Model::Open(testing::TinyCheckpoint())).value();
  testing::ChildProcess enc({testing::BinaryDir() + "/encoder_node/encoder_node", "--model", testing::TinyCheckpoint(),
                             "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--step-tokens", "1",
                             "--threads", "1", "--shutdown-grace-seconds", "2"},
                            "encoder_node ready");
  ASSERT_TRUE(enc.ready());
  const std::string enc_addr = enc.fields()["grpc"];
  NodeClient client(std::make_shared<ChannelSet>(), model->fingerprint());
  PrefillInput in;
  in.ns = NamespaceRoot(*ParseFingerprint(model->fingerprint()), kUnitFormatVersion, "t");
  in.tokens = Tokens(30000, 7);  // one token a step: far longer than the bound below
  in.unit_tokens = 32;
  auto call = std::async(std::launch::async, [&] {
    return client.Prefill(enc_addr, in, std::chrono::steady_clock::now() + std::chrono::seconds(120));
  });
  const auto start = std::chrono::steady_clock::now();
  auto running = [&] {
    auto st = client.Status(NodeRole::kEncoder, enc_addr, std::chrono::seconds(2));
    return st.ok() ? st->running : -1;
  };
  while (running() != 1 && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto term = std::chrono::steady_clock::now();
  const int status = enc.Kill(SIGTERM);
  const double exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - term).count();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GT(exit_s, 1.5);  // the grace period was given
  EXPECT_LT(exit_s, 6.0);   // 2 s of grace, then one step
  const StatusOr<PrefillOutput> out = call.get();
  EXPECT_FALSE(out.ok());
}

}  // namespace
}  // namespace ds41
