// The node binaries as processes: an encoder killed mid-prefill, /metrics of both roles.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <future>
#include <random>
#include <thread>

#include "decoder_node/decoder_service.h"
#include "node.grpc.pb.h"
#include "rpc/server.h"
#include "node_client/node_client.h"
#include "node_client/node_protocol.h"
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
      [&encoders](const std::string& e, const PrefillInput& in, std::chrono::steady_clock::time_point d,
                  CancelToken* cancel) { return encoders.Prefill(e, in, d, cancel); },
      DecoderOptions{}, &metrics, &pool);
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
  const GenerateCallResult call = client.Generate(dec.fields()["grpc"], in, nullptr, [&](const std::vector<int32_t>& ids) {
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

}  // namespace
}  // namespace ds41
