// encoder + decoder + cache service over real gRPC on loopback (in process), against the
// single-process engine running the same CED semantics (issue: encoder and decoder nodes).
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <random>
#include <thread>

#include "cache.grpc.pb.h"
#include "cache_client/cache_client.h"
#include "cache_service/service.h"
#include "decoder_node/decoder_service.h"
#include "engine/config/presets.h"
#include "engine/sampling.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"
#include "encoder_node/encoder_service.h"
#include "node.grpc.pb.h"
#include "node_client/node_client.h"
#include "node_client/node_codec.h"
#include "node_client/node_protocol.h"
#include "rpc/server.h"
#include "rpc/status_map.h"
#include "serving/swa_state_service.h"
#include "tests/support/child_process.h"
#include "tests/support/test_checkpoint.h"
#include "util/thread_scratch.h"

namespace ds41 {
namespace {

namespace pb = ds41::node::v1;
constexpr int kUnit = 32;

std::vector<int32_t> Tokens(int n, int seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = 3 + static_cast<int32_t>(rng() % 500);
  return t;
}

struct CacheServer {
  prometheus::Registry reg;
  StoreMetrics metrics{reg};
  std::unique_ptr<UnitStore> store;
  ThreadPool store_io{4, ThreadPool::Idle::kSleep, "test-store-io"};
  std::unique_ptr<CacheService> svc;
  RpcServer rpc;
  std::string addr;
  explicit CacheServer(const std::string& fp) {
    StoreOptions so;
    so.path = testing::TempDir("nodes-cache");
    store = std::move(UnitStore::Open(so, &metrics)).value();
    svc = std::make_unique<CacheService>(store.get(), &metrics, CacheServiceOptions{fp}, &store_io);
    rpc = std::move(StartRpcServer({}, {svc.get()})).value();
    addr = "127.0.0.1:" + std::to_string(rpc.port);
  }
  ~CacheServer() { rpc.server->Shutdown(); }
};

struct EncoderServer {
  prometheus::Registry reg;
  NodeMetrics metrics{reg, "encoder"};
  std::unique_ptr<EncoderCore> core;
  std::unique_ptr<EncoderService> svc;
  std::unique_ptr<SwaStateService> swa;
  RpcServer rpc;
  std::string addr;
  EncoderServer(const Model& m, CacheClient* cache, const NodeClient* peers, const NodeExecutors& pools) {
    core = std::make_unique<EncoderCore>(
        m, cache,
        [peers](const std::string& peer, const UnitKey& ns, const UnitKey& key, int64_t position) {
          return peers->FetchSwa(peer, ns, key, position);
        },
        EncoderOptions{}, &metrics, pools);
    svc = std::make_unique<EncoderService>(core.get(), m.fingerprint(), &metrics);
    swa = std::make_unique<SwaStateService>(core->swa_pool(), m.fingerprint());
    rpc = std::move(StartRpcServer({}, {svc.get(), swa.get()})).value();
    addr = "127.0.0.1:" + std::to_string(rpc.port);
  }
  ~EncoderServer() { rpc.server->Shutdown(); }
};

struct DecoderServer {
  prometheus::Registry reg;
  NodeMetrics metrics{reg, "decoder"};
  SpeculationMetrics spec{reg};
  ThreadPool writers{3, ThreadPool::Idle::kSleep, "test-write"};
  std::unique_ptr<DecoderCore> core;
  std::unique_ptr<DecoderService> svc;
  std::unique_ptr<SwaStateService> swa;
  RpcServer rpc;
  std::string addr;
  DecoderServer(const Model& m, CacheClient* cache, const NodeClient* encoders, const NodeExecutors& pools,
                DecoderOptions o = {}) {
    core = std::make_unique<DecoderCore>(
        m, cache,
        PrefillThrough(encoders), o, &metrics, pools, &spec);
    svc = std::make_unique<DecoderService>(core.get(), m.fingerprint(), &metrics, &writers);
    swa = std::make_unique<SwaStateService>(core->swa_pool(), m.fingerprint());
    rpc = std::move(StartRpcServer({}, {svc.get(), swa.get()})).value();
    addr = "127.0.0.1:" + std::to_string(rpc.port);
  }
  ~DecoderServer() { rpc.server->Shutdown(); }
};

struct Reply {
  grpc::Status status;
  std::vector<int32_t> tokens;
  pb::Usage usage;
};

class NodesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = std::move(Model::Open(testing::TinyCheckpoint())).value().release(); }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    cache_ = std::make_unique<CacheServer>(model_->fingerprint());
    CacheClientOptions co;
    co.shards = {cache_->addr};
    co.io = &io_;
    client_ = std::move(CacheClient::Create(co)).value();
    channels_ = std::make_shared<ChannelSet>();
    nodes_ = std::make_unique<NodeClient>(channels_, model_->fingerprint());
    encoder_ = std::make_unique<EncoderServer>(*model_, client_.get(), nodes_.get(), pools_);
    dec_a_ = std::make_unique<DecoderServer>(*model_, client_.get(), nodes_.get(), pools_);
    dec_b_ = std::make_unique<DecoderServer>(*model_, client_.get(), nodes_.get(), pools_);
    ns_ = CacheNamespace::Make(model_->fingerprint(), "tenant");
  }

  // What the router does: the cached prefix of the prompt without its last token, then Generate.
  Reply Turn(DecoderServer* d, const std::string& session, const std::vector<int32_t>& prompt, const std::string& swa_peer,
             int64_t expect_hit = -1, int max_tokens = 8, const std::string& encoder = "") {
    std::vector<int32_t> head(prompt.begin(), prompt.end() - 1);
    int64_t H = client_->LookupPrefix(ns_, head, kUnit).tokens;
    // The previous turn's units land asynchronously.
    for (int i = 0; i < 100 && expect_hit >= 0 && H != expect_hit; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      H = client_->LookupPrefix(ns_, head, kUnit).tokens;
    }
    if (expect_hit >= 0) {
      EXPECT_EQ(H, expect_hit);
    }
    GenerateInput in;
    in.session_id = session;
    in.ns = ns_.id;
    in.tokens = prompt;
    in.cached_tokens = H;
    in.encoder = encoder.empty() ? encoder_->addr : encoder;
    in.swa_peer = swa_peer;
    in.sampling.max_tokens = static_cast<uint32_t>(max_tokens);
    in.unit_tokens = kUnit;
    in.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    Reply r;
    const GenerateCallResult call = nodes_->Generate(d->addr, in, nullptr, [&](const GeneratedTokens& got_ids) {
      const std::vector<int32_t>& ids = got_ids.ids;
      r.tokens.insert(r.tokens.end(), ids.begin(), ids.end());
      return true;
    });
    r.status = ToGrpc(call.status);
    if (!call.end.finish_reason.empty()) EncodeUsage(call.end.usage, &r.usage);
    return r;
  }

  Reply Generate(DecoderServer* d, const pb::GenerateRequest& req) {
    auto stub = pb::Decoder::NewStub(channels_->Get(d->addr));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto rd = stub->Generate(&ctx, req);
    Reply r;
    pb::GenerateResponse m;
    while (rd->Read(&m)) {
      r.tokens.insert(r.tokens.end(), m.tokens().begin(), m.tokens().end());
      if (m.has_usage()) r.usage = m.usage();
    }
    r.status = rd->Finish();
    return r;
  }

  // The single-process engine: CED prefill of the prompt on `st`, then greedy decode.
  std::vector<int32_t> Reference(SequenceState* st, const std::vector<int32_t>& prompt, int max_tokens = 8) {
    Engine e(*model_);
    std::vector<float> lg;
    EXPECT_TRUE(e.CedPrefill(st, {prompt, {}, {}}, -1, &lg).ok());
    std::vector<int32_t> out;
    const int V = model_->config().vocab_size;
    for (int i = 0; i < max_tokens; ++i) {
      out.push_back(Argmax(lg.data(), V));
      if (i + 1 < max_tokens) {
        EXPECT_TRUE(e.DecodeBatch({st}, {out.back()}, &lg).ok());
      }
    }
    return out;
  }

  // A greedy reply under OpenAI's logit adjustments with `top` top log-probabilities per token: from
  // decoder `d` (got) and from the single-process engine (want), which must agree.
  void ExpectAdjustedRepliesEqualOneProcess(DecoderServer* d, const std::vector<int32_t>& prompt, const LogitAdjustments& a,
                                            int max_tokens, int top) {
    // The one-process reference: CED prefill, then each step's logits adjusted before the argmax.
    SequenceState st = SequenceState::Create(model_->config());
    Engine e(*model_);
    std::vector<float> lg;
    ASSERT_TRUE(e.CedPrefill(&st, {prompt, {}, {}}, -1, &lg).ok());
    const int V = model_->config().vocab_size;
    LogitProcessor processor(a);
    std::vector<int32_t> want;
    std::vector<TokenLogprob> want_lp;
    for (int i = 0; i < max_tokens; ++i) {
      processor.Apply(lg.data(), V);
      want.push_back(Argmax(lg.data(), V));
      processor.Count(want.back());
      want_lp.push_back(LogprobsOf(lg.data(), V, want.back(), top));
      if (i + 1 < max_tokens) {
        ASSERT_TRUE(e.DecodeBatch({&st}, {want.back()}, &lg).ok());
      }
    }
    GenerateInput in;
    in.ns = ns_.id;
    in.tokens = prompt;
    in.encoder = encoder_->addr;
    in.sampling.max_tokens = static_cast<uint32_t>(max_tokens);
    in.sampling.frequency_penalty = a.frequency_penalty;
    in.sampling.presence_penalty = a.presence_penalty;
    in.sampling.logit_bias = a.bias;
    in.sampling.logprobs = true;
    in.sampling.top_logprobs = top;
    in.unit_tokens = kUnit;
    in.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    GeneratedTokens got;
    const GenerateCallResult res = nodes_->Generate(d->addr, in, nullptr, [&](const GeneratedTokens& part) {
      EXPECT_EQ(part.logprobs.size(), part.ids.size());
      got.ids.insert(got.ids.end(), part.ids.begin(), part.ids.end());
      got.logprobs.insert(got.logprobs.end(), part.logprobs.begin(), part.logprobs.end());
      return true;
    });
    ASSERT_TRUE(res.status.ok()) << res.status.ToString();
    EXPECT_EQ(got.ids, want);
    ASSERT_EQ(got.logprobs.size(), want_lp.size());
    for (size_t i = 0; i < want_lp.size(); ++i) {
      SCOPED_TRACE("token " + std::to_string(i));
      EXPECT_NEAR(got.logprobs[i].logprob, want_lp[i].logprob, 1e-4);
      ASSERT_EQ(got.logprobs[i].top.size(), static_cast<size_t>(top));
      for (int k = 0; k < top; ++k) {
        EXPECT_EQ(got.logprobs[i].top[k].first, want_lp[i].top[k].first);
        EXPECT_NEAR(got.logprobs[i].top[k].second, want_lp[i].top[k].second, 1e-4);
      }
      // Greedy: the chosen token is the most likely one.
      if (top > 0) {
        EXPECT_EQ(got.logprobs[i].top[0].first, got.ids[i]);
      }
    }
  }

  // Constrained decoding (issue 44 item 3) on a decoder with `o` (a masker over a made-up
  // byte-level vocabulary is added): greedy and sampled replies are each one complete document of
  // the schema, ended by the end of sentence, with the same tokens and logprobs streamed per token.
  // A made-up byte-level vocabulary for the model: ids 0-2 control, then every byte, then merges
  // over JSON's alphabet, so tokens end values, open and close strings, and hold several bytes.
  struct JsonVocab {
    std::vector<std::string> bytes;
    std::unique_ptr<grammar::TokenMasker> masker;
    std::string Text(const std::vector<int32_t>& ids) const {
      std::string t;
      for (int32_t id : ids)
        if (id != kEosId) t += bytes[static_cast<size_t>(id)];
      return t;
    }
  };
  static JsonVocab MakeJsonVocab() {
    const int V = model_->config().vocab_size;
    JsonVocab v;
    v.bytes.resize(static_cast<size_t>(V));
    std::vector<bool> control(static_cast<size_t>(V), false);
    for (int id = 0; id < 3; ++id) control[static_cast<size_t>(id)] = true;
    std::mt19937 rng(5);
    const std::string alphabet = "{}[]\",:0123456789-truefalsenul ab";
    for (int id = 3; id < V; ++id) {
      if (id < 259) {
        v.bytes[static_cast<size_t>(id)] = std::string(1, static_cast<char>(id - 3));
      } else {
        for (int k = 2 + static_cast<int>(rng() % 4); k > 0; --k) v.bytes[static_cast<size_t>(id)] += alphabet[rng() % alphabet.size()];
      }
    }
    v.bytes[kEosId] = "<eos>";
    v.masker = std::make_unique<grammar::TokenMasker>(v.bytes, control, V, kEosId);
    return v;
  }
  static constexpr const char* kToolSchema = R"({"type": "object", "properties": {"ok": {"type": "boolean"},
      "n": {"type": "integer"}, "mode": {"enum": ["read", "write"]}, "tags": {"type": "array", "items": {"enum": [1, 2]}}},
      "required": ["ok", "n", "mode"], "additionalProperties": false})";
  // The ids decoder `d` streams for `in` (the call must succeed).
  std::vector<int32_t> GeneratedIds(DecoderServer* d, const GenerateInput& in) {
    std::vector<int32_t> ids;
    const GenerateCallResult res = nodes_->Generate(d->addr, in, nullptr, [&](const GeneratedTokens& part) {
      ids.insert(ids.end(), part.ids.begin(), part.ids.end());
      return true;
    });
    EXPECT_TRUE(res.status.ok()) << res.status.ToString();
    return ids;
  }

  GenerateInput ConstrainedInput(const std::vector<int32_t>& prompt, float temperature, uint64_t seed) {
    GenerateInput in;
    in.ns = ns_.id;
    in.tokens = prompt;
    in.encoder = encoder_->addr;
    in.sampling.temperature = temperature;
    in.sampling.seed = seed;
    in.sampling.max_tokens = 400;
    in.sampling.stop_ids = {kEosId};
    in.sampling.response_json = true;
    in.sampling.response_schema = kToolSchema;
    in.unit_tokens = kUnit;
    in.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    return in;
  }

  void ExpectRepliesFollowTheSchema(DecoderOptions o) {
    const JsonVocab vocab = MakeJsonVocab();
    o.masker = vocab.masker.get();
    DecoderServer d(*model_, client_.get(), nodes_.get(), pools_, o);
    int sampled_differ = 0;
    std::string first_doc;
    for (int round = 0; round < 6; ++round) {
      GenerateInput in = ConstrainedInput(Tokens(30, 90 + round), round == 0 ? 0.0f : 1.0f, static_cast<uint64_t>(round));
      in.sampling.logprobs = true;
      std::vector<int32_t> ids;
      const GenerateCallResult res = nodes_->Generate(d.addr, in, nullptr, [&](const GeneratedTokens& part) {
        ids.insert(ids.end(), part.ids.begin(), part.ids.end());
        for (const TokenLogprob& lp : part.logprobs) EXPECT_TRUE(std::isfinite(lp.logprob));
        return true;
      });
      ASSERT_TRUE(res.status.ok()) << res.status.ToString();
      ASSERT_EQ(res.end.finish_reason, "stop") << "round " << round;
      ASSERT_FALSE(ids.empty());
      EXPECT_EQ(ids.back(), kEosId);
      const std::string doc = vocab.Text(ids);
      SCOPED_TRACE(doc);
      const auto v = nlohmann::json::parse(doc, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(v.is_discarded());
      EXPECT_TRUE(v["ok"].is_boolean());
      EXPECT_TRUE(v["n"].is_number_integer());
      EXPECT_TRUE(v["mode"] == "read" || v["mode"] == "write");
      for (const auto& t : v.value("tags", nlohmann::json::array())) EXPECT_TRUE(t == 1 || t == 2);
      if (round == 0) first_doc = doc;
      sampled_differ += round > 0 && doc != first_doc;
    }
    EXPECT_GT(sampled_differ, 0);  // sampling explored the schema, not one greedy path
  }

  static Model* model_;
  // As a node binary builds them (serving/node_setup.h), before everything that uses them.
  ThreadPool pool_{2};
  ThreadPool requests_{3, ThreadPool::Idle::kSleep, "test-req"};
  ThreadPool io_{4, ThreadPool::Idle::kSleep, "test-io"};
  const NodeExecutors pools_{&pool_, &requests_, &io_};
  std::unique_ptr<CacheServer> cache_;
  std::unique_ptr<CacheClient> client_;
  std::shared_ptr<ChannelSet> channels_;
  std::unique_ptr<NodeClient> nodes_;
  std::unique_ptr<EncoderServer> encoder_;
  std::unique_ptr<DecoderServer> dec_a_, dec_b_;
  CacheNamespace ns_;
};
Model* NodesTest::model_ = nullptr;

TEST_F(NodesTest, ThreeTurnSessionEqualsOneProcessOnEveryPrefixPath) {
  const ModelConfig& c = model_->config();
  SequenceState ref = SequenceState::Create(c);
  // Turn 1 from scratch on decoder A.
  auto p1 = Tokens(20, 1);
  Reply r1 = Turn(dec_a_.get(), "s1", p1, "", 0);
  ASSERT_TRUE(r1.status.ok()) << r1.status.error_message();
  EXPECT_EQ(r1.tokens, Reference(&ref, p1));
  EXPECT_EQ(r1.usage.prefix_source(), "none");
  // Turn 2 extends it (a tool result): decoder A is warm and holds the SWA state at the previous end.
  auto p2 = p1;
  p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end());
  for (int32_t t : Tokens(150, 2)) p2.push_back(t);
  Reply r2 = Turn(dec_a_.get(), "s1", p2, dec_a_->addr, ref.length);
  ASSERT_TRUE(r2.status.ok()) << r2.status.error_message();
  EXPECT_EQ(r2.usage.cached_tokens(), ref.length);
  EXPECT_EQ(r2.usage.computed_tokens(), static_cast<int64_t>(p2.size()) - ref.length);
  EXPECT_EQ(r2.usage.prefix_source(), "warm");
  EXPECT_EQ(r2.usage.swa_source(), "peer");
  EXPECT_EQ(r2.tokens, Reference(&ref, p2));
  // Turn 3 lands on decoder B: prefix from the store, SWA state pulled from A.
  auto p3 = p2;
  p3.insert(p3.end(), r2.tokens.begin(), r2.tokens.end());
  for (int32_t t : Tokens(420, 3)) p3.push_back(t);
  Reply r3 = Turn(dec_b_.get(), "s1", p3, dec_a_->addr, ref.length);
  ASSERT_TRUE(r3.status.ok()) << r3.status.error_message();
  EXPECT_EQ(r3.usage.prefix_source(), "cache");
  EXPECT_EQ(r3.usage.swa_source(), "peer");
  EXPECT_EQ(r3.usage.cached_tokens(), ref.length);
  EXPECT_EQ(r3.tokens, Reference(&ref, p3));
  EXPECT_GT(p3.size(), 590u);
}

// A node runs replays on its request and admission threads, of which it has many; the scratch a
// pass grows there is handed back when the request's work on that thread ends (util/thread_scratch.h),
// so the nodes' heap follows the passes running, not every thread that ever ran one.
TEST_F(NodesTest, RequestThreadsKeepNoScratchAfterTheirReplays) {
  ThreadPool inline_pool(1);  // every pass on the calling thread: this one
  auto p1 = Tokens(300, 21);
  ASSERT_TRUE(Turn(dec_a_.get(), "scratch", p1, "", 0).status.ok());
  std::vector<int32_t> head(p1.begin(), p1.end() - 1);
  int64_t H = 0;
  for (int i = 0; i < 100 && H < kUnit; ++i) {  // the turn's units land asynchronously
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    H = client_->LookupPrefix(ns_, head, kUnit).tokens;
  }
  ASSERT_GE(H, kUnit);
  // An encoder with an empty SWA pool and no peer: the state at H is replayed on this thread.
  EncoderServer enc(*model_, client_.get(), nodes_.get(), {&inline_pool, &inline_pool, &io_});
  PrefillInput pin;
  pin.ns = ns_.id;
  pin.tokens = p1;
  pin.cached_tokens = H;
  pin.unit_tokens = kUnit;
  auto out = enc.core->Prefill(pin);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->swa_source, "replay");
  EXPECT_GT(out->replay_tokens, 0);
  EXPECT_EQ(ThreadScratchBytes(), 0u);
  // A decoder's admission (prefix, the encoder's call, its replay of the last window) on this thread.
  DecoderServer dec(*model_, client_.get(), nodes_.get(), {&inline_pool, &inline_pool, &io_});
  GenerateInput in;
  in.session_id = "scratch-2";
  in.ns = ns_.id;
  in.tokens = p1;
  in.cached_tokens = H;
  in.encoder = encoder_->addr;
  in.sampling.max_tokens = 2;
  in.unit_tokens = kUnit;
  in.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto stream = dec.core->Generate(in);
  std::vector<int32_t> got, part;
  for (bool done = false; !done;) {
    done = stream->Pop(&part, std::chrono::milliseconds(100));
    got.insert(got.end(), part.begin(), part.end());
  }
  EXPECT_TRUE(stream->status().ok()) << stream->status().ToString();
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(ThreadScratchBytes(), 0u);
}

TEST_F(NodesTest, EncoderReplayPathEqualsOneProcessReplay) {
  const ModelConfig& c = model_->config();
  SequenceState ref = SequenceState::Create(c);
  auto p1 = Tokens(37, 11);
  Reply r1 = Turn(dec_a_.get(), "s2", p1, "", 0);
  ASSERT_TRUE(r1.status.ok());
  EXPECT_EQ(r1.tokens, Reference(&ref, p1));
  auto p2 = p1;
  p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end());
  for (int32_t t : Tokens(60, 12)) p2.push_back(t);
  // Nobody is named for the SWA state: the encoder rebuilds it by replay; decoder B is cold.
  Reply r2 = Turn(dec_b_.get(), "s2", p2, "", ref.length);
  ASSERT_TRUE(r2.status.ok()) << r2.status.error_message();
  EXPECT_EQ(r2.usage.swa_source(), "replay");
  EXPECT_EQ(r2.usage.encoder_replay_tokens(), std::min<int64_t>(ref.length, c.window_size));
  // The same in one process: global KV kept, SWA state dropped, encoder replay, then the turn.
  const int64_t h = ref.length;
  SequenceState cold = SequenceState::Create(c);
  for (size_t i = 0; i < cold.kv.size(); ++i) {
    cold.kv[i] = ref.kv[i];
  }
  cold.length = h;
  Engine e(*model_);
  ASSERT_TRUE(e.EncoderReplay(&cold, {p2, {}, {}}, std::max<int64_t>(0, h - c.window_size)).ok());
  EXPECT_EQ(r2.tokens, Reference(&cold, p2));
}

TEST_F(NodesTest, EncoderLocalSwaPoolPath) {
  const ModelConfig& c = model_->config();
  auto p1 = Tokens(45, 21);
  Reply r1 = Turn(dec_a_.get(), "s3", p1, "", 0);
  ASSERT_TRUE(r1.status.ok());
  // Another session sharing the whole first prompt: the encoder wrote its tail and kept its SWA state.
  auto q = p1;
  for (int32_t t : Tokens(30, 22)) q.push_back(t);
  Reply r = Turn(dec_b_.get(), "s4", q, "", static_cast<int64_t>(p1.size()));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.usage.swa_source(), "local");
  SequenceState ref = SequenceState::Create(c);
  Engine e(*model_);
  ASSERT_TRUE(e.EncodePrefill(&ref, {p1, {}, {}}).ok());
  EXPECT_EQ(r.tokens, Reference(&ref, q));
}

TEST_F(NodesTest, SwaStatePulledFromAnotherEncoder) {
  auto p1 = Tokens(45, 41);
  Reply r1 = Turn(dec_a_.get(), "s7", p1, "", 0);
  ASSERT_TRUE(r1.status.ok());
  // Another session continues the first prompt on a second encoder: the state at the prompt's end
  // is pulled from the encoder that computed it, not replayed.
  EncoderServer other(*model_, client_.get(), nodes_.get(), pools_);
  auto q = p1;
  for (int32_t t : Tokens(30, 42)) q.push_back(t);
  Reply r = Turn(dec_b_.get(), "s8", q, encoder_->addr, static_cast<int64_t>(p1.size()), 8, other.addr);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.usage.swa_source(), "peer");
  EXPECT_EQ(r.usage.encoder_replay_tokens(), 0);
  SequenceState ref = SequenceState::Create(model_->config());
  Engine e(*model_);
  ASSERT_TRUE(e.EncodePrefill(&ref, {p1, {}, {}}).ok());
  EXPECT_EQ(r.tokens, Reference(&ref, q));
}

TEST_F(NodesTest, CacheDownMeansUncachedButCorrect) {
  const ModelConfig& c = model_->config();
  auto p1 = Tokens(40, 31);
  Reply r1 = Turn(dec_a_.get(), "s5", p1, "", 0);
  ASSERT_TRUE(r1.status.ok());
  // The reply's units were acknowledged before the stream ended (units_put_total counts them).
  EXPECT_GT(dec_a_->metrics.units_put_ok.Value(), 0);
  EXPECT_EQ(dec_a_->metrics.units_put_error.Value(), 0);
  cache_.reset();  // the only shard is gone
  auto p2 = p1;
  p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end());
  for (int32_t t : Tokens(20, 32)) p2.push_back(t);
  Reply r2 = Turn(dec_b_.get(), "s5", p2, "");
  ASSERT_TRUE(r2.status.ok()) << r2.status.error_message();
  EXPECT_EQ(r2.usage.cached_tokens(), 0);
  SequenceState fresh = SequenceState::Create(c);
  EXPECT_EQ(r2.tokens, Reference(&fresh, p2));
  // The store could not take this turn's reply units: the reply came anyway, and the failure is
  // counted, not silent.
  EXPECT_GT(dec_b_->metrics.units_put_error.Value(), 0);
}

TEST_F(NodesTest, CancelFreesTheSequence) {
  const uint64_t baseline = dec_a_->core->ResidentBytes();
  pb::GenerateRequest req;
  FillModel(model_->fingerprint(), req.mutable_model());
  req.mutable_ns()->set_id(KeyString(ns_.id));
  for (int32_t t : Tokens(30, 41)) req.add_tokens(t);
  req.set_encoder(encoder_->addr);
  req.mutable_sampling()->set_max_tokens(100000);
  req.set_unit_tokens(kUnit);
  auto stub = pb::Decoder::NewStub(channels_->Get(dec_a_->addr));
  grpc::ClientContext ctx;
  auto rd = stub->Generate(&ctx, req);
  pb::GenerateResponse m;
  int got = 0;
  while (got < 5 && rd->Read(&m)) got += m.tokens_size();
  EXPECT_GE(got, 5);
  EXPECT_EQ(dec_a_->core->running(), 1);
  ctx.TryCancel();
  while (rd->Read(&m)) {
  }
  EXPECT_EQ(rd->Finish().error_code(), grpc::StatusCode::CANCELLED);
  for (int i = 0; i < 100 && dec_a_->core->running() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(dec_a_->core->running(), 0);
  EXPECT_EQ(dec_a_->core->ResidentBytes(), baseline);
}

// Request migration (issue 28 item 3): a decoder died after streaming `R` tokens; another decoder
// gets the prompt, those tokens (resumed) and the H the first attempt had, and must continue with
// exactly the tokens the uninterrupted run produced, greedy or seeded, with a prompt past the
// window (where a fresh CED prefill of prompt + streamed tokens would replay from another start).
TEST_F(NodesTest, AMigratedRequestContinuesAsTheUninterruptedRunGreedyOrSeeded) {
  const int kTotal = 40, kStreamed = 15;
  auto call = [&](DecoderServer* d, const std::vector<int32_t>& tokens, int64_t resumed, int max_tokens, float temperature) {
    GenerateInput in;
    in.ns = ns_.id;
    in.tokens = tokens;
    in.resumed = resumed;
    in.encoder = encoder_->addr;
    in.sampling.temperature = temperature;
    in.sampling.top_p = 0.95f;
    in.sampling.seed = 1234;
    in.sampling.max_tokens = static_cast<uint32_t>(max_tokens);
    in.unit_tokens = kUnit;
    in.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    Reply r;
    const GenerateCallResult res = nodes_->Generate(d->addr, in, nullptr, [&](const GeneratedTokens& got_ids) {
      const std::vector<int32_t>& ids = got_ids.ids;
      r.tokens.insert(r.tokens.end(), ids.begin(), ids.end());
      return true;
    });
    r.status = ToGrpc(res.status);
    if (!res.end.finish_reason.empty()) EncodeUsage(res.end.usage, &r.usage);
    return r;
  };
  for (const float temperature : {0.0f, 0.9f}) {
    SCOPED_TRACE(temperature);
    const std::vector<int32_t> prompt = Tokens(300, temperature == 0 ? 61 : 62);
    ASSERT_GT(prompt.size(), static_cast<size_t>(model_->config().window_size));
    const Reply whole = call(dec_a_.get(), prompt, 0, kTotal, temperature);
    ASSERT_TRUE(whole.status.ok()) << whole.status.error_message();
    ASSERT_EQ(whole.tokens.size(), static_cast<size_t>(kTotal));
    std::vector<int32_t> resumed_tokens = prompt;
    resumed_tokens.insert(resumed_tokens.end(), whole.tokens.begin(), whole.tokens.begin() + kStreamed);
    const Reply rest = call(dec_b_.get(), resumed_tokens, kStreamed, kTotal - kStreamed, temperature);
    ASSERT_TRUE(rest.status.ok()) << rest.status.error_message();
    EXPECT_EQ(rest.tokens, std::vector<int32_t>(whole.tokens.begin() + kStreamed, whole.tokens.end()));
    EXPECT_EQ(rest.usage.prompt_tokens(), static_cast<int64_t>(prompt.size()));
    EXPECT_EQ(rest.usage.completion_tokens(), kTotal - kStreamed);
    // For contrast, not a requirement: the streamed tokens taken as prompt (a fresh CED prefill).
    const Reply naive = call(dec_b_.get(), resumed_tokens, 0, kTotal - kStreamed, temperature);
    ASSERT_TRUE(naive.status.ok());
    std::printf("temperature %.1f: prompt + streamed tokens as a new prompt %s the uninterrupted run\n", temperature,
                naive.tokens == rest.tokens ? "also equals" : "differs from");
  }
  EXPECT_EQ(dec_b_->metrics.computed_tokens.Add({{"kind", "resumed"}}).Value(), 2 * kStreamed);
}

// Penalties, logit_bias and logprobs (issue 44 items 5, 6) on the decoder node: the reply and its
// log-probabilities are the one-process engine's under the same adjustments.
TEST_F(NodesTest, PenaltiesLogitBiasAndLogprobsEqualOneProcess) {
  const std::vector<int32_t> prompt = Tokens(40, 81);
  SequenceState ref = SequenceState::Create(model_->config());
  const std::vector<int32_t> plain = Reference(&ref, prompt, 12);
  // Ban the plain reply's first token, favour another of its tokens; penalize repeats.
  const int32_t favoured = *std::find_if(plain.begin(), plain.end(), [&](int32_t t) { return t != plain[0]; });
  const LogitAdjustments a{1.5f, 0.5f, {{plain[0], -100.0f}, {favoured, 3.0f}}};
  ExpectAdjustedRepliesEqualOneProcess(dec_a_.get(), prompt, a, 12, 3);
  // No adjustments and no top ids: the plain reply, each token with its own log-probability.
  ExpectAdjustedRepliesEqualOneProcess(dec_a_.get(), prompt, {}, 12, 0);
}

TEST_F(NodesTest, RepliesWithAResponseFormatFollowTheSchema) { ExpectRepliesFollowTheSchema({}); }

// Migration (item 7): a constrained reply resumed on another decoder after some of its tokens
// continues as the uninterrupted one: the grammar reads the resumed tokens first.
TEST_F(NodesTest, AMigratedConstrainedReplyContinuesAsTheUninterruptedOne) {
  const JsonVocab vocab = MakeJsonVocab();
  DecoderOptions o;
  o.masker = vocab.masker.get();
  DecoderServer a(*model_, client_.get(), nodes_.get(), pools_, o), b(*model_, client_.get(), nodes_.get(), pools_, o);
  const std::vector<int32_t> prompt = Tokens(40, 77);
  const std::vector<int32_t> whole = GeneratedIds(&a, ConstrainedInput(prompt, 0.0f, 0));
  ASSERT_GT(whole.size(), 4u) << vocab.Text(whole);
  const size_t k = whole.size() / 2;
  GenerateInput resumed = ConstrainedInput(prompt, 0.0f, 0);
  resumed.tokens.insert(resumed.tokens.end(), whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(k));
  resumed.resumed = static_cast<int64_t>(k);
  resumed.sampling.max_tokens = 400 - static_cast<uint32_t>(k);
  EXPECT_EQ(GeneratedIds(&b, resumed), std::vector<int32_t>(whole.begin() + static_cast<std::ptrdiff_t>(k), whole.end()))
      << vocab.Text(whole);
  // Resumed tokens the schema cannot have written are refused.
  GenerateInput bad = ConstrainedInput(prompt, 0.0f, 0);
  bad.tokens.push_back(3 + 'x');
  bad.resumed = 1;
  EXPECT_EQ(nodes_->Generate(b.addr, bad, nullptr, [](const GeneratedTokens&) { return true; }).status.code(),
            StatusCode::kInvalidArgument);
}

// Thinking mode (response_after_reasoning): the reasoning is the model's own, so its first token is
// the unconstrained one (not the document's '{'); once "</think>" is written (here as resumed
// tokens, which random weights would take long to spell), the rest is one document of the schema.
TEST_F(NodesTest, AResponseFormatAfterReasoningLeavesTheReasoningFree) {
  const JsonVocab vocab = MakeJsonVocab();
  DecoderOptions o;
  o.masker = vocab.masker.get();
  DecoderServer d(*model_, client_.get(), nodes_.get(), pools_, o);
  const std::vector<int32_t> prompt = Tokens(36, 41);
  GenerateInput plain = ConstrainedInput(prompt, 0.0f, 0);
  plain.sampling.response_json = false;
  plain.sampling.response_schema.clear();
  plain.sampling.max_tokens = 1;
  GenerateInput reasoning = ConstrainedInput(prompt, 0.0f, 0);
  reasoning.sampling.response_after_reasoning = true;
  reasoning.sampling.max_tokens = 1;
  GenerateInput document = ConstrainedInput(prompt, 0.0f, 0);
  document.sampling.max_tokens = 1;
  const std::vector<int32_t> free_first = GeneratedIds(&d, plain);
  const std::vector<int32_t> document_first = GeneratedIds(&d, document);
  ASSERT_EQ(free_first.size(), 1u);
  ASSERT_EQ(document_first.size(), 1u);
  ASSERT_EQ(vocab.Text(document_first).substr(0, 1), "{");
  ASSERT_NE(free_first, document_first) << "this prompt cannot tell the two apart";
  EXPECT_EQ(GeneratedIds(&d, reasoning), free_first);

  const std::string thought = "Let me see.</think>";
  for (int round = 0; round < 3; ++round) {
    GenerateInput in = ConstrainedInput(prompt, round == 0 ? 0.0f : 1.0f, static_cast<uint64_t>(round));
    in.sampling.response_after_reasoning = true;
    for (char c : thought) in.tokens.push_back(3 + static_cast<unsigned char>(c));
    in.resumed = static_cast<int64_t>(thought.size());
    const std::vector<int32_t> ids = GeneratedIds(&d, in);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.back(), kEosId);
    const std::string doc = vocab.Text(ids);
    const auto v = nlohmann::json::parse(doc, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(v.is_discarded()) << doc;
    EXPECT_TRUE(v["ok"].is_boolean()) << doc;
    EXPECT_TRUE(v["mode"] == "read" || v["mode"] == "write") << doc;
  }
}

TEST_F(NodesTest, AResponseFormatNeedsATokenizerAndAValidSchema) {
  GenerateInput in;
  in.ns = ns_.id;
  in.tokens = Tokens(20, 3);
  in.encoder = encoder_->addr;
  in.sampling.max_tokens = 8;
  in.sampling.response_json = true;
  in.unit_tokens = kUnit;
  in.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto code = [&](DecoderServer* d) {
    return nodes_->Generate(d->addr, in, nullptr, [](const GeneratedTokens&) { return true; }).status.code();
  };
  EXPECT_EQ(code(dec_a_.get()), StatusCode::kFailedPrecondition);  // no masker
  const std::vector<std::string> bytes = {"<bos>", "<eos>", "<pad>", "{", "}", "\""};
  const grammar::TokenMasker masker(bytes, {true, true, true}, model_->config().vocab_size, kEosId);
  DecoderOptions o;
  o.masker = &masker;
  DecoderServer d(*model_, client_.get(), nodes_.get(), pools_, o);
  in.sampling.response_schema = R"({"type": "string", "pattern": "x"})";
  EXPECT_EQ(code(&d), StatusCode::kInvalidArgument);
}

TEST_F(NodesTest, BadRequestsAreRefusedAndNodesStayUp) {
  auto base = [&] {
    pb::GenerateRequest req;
    FillModel(model_->fingerprint(), req.mutable_model());
    req.mutable_ns()->set_id(KeyString(ns_.id));
    for (int32_t t : Tokens(10, 51)) req.add_tokens(t);
    req.set_encoder(encoder_->addr);
    req.set_unit_tokens(kUnit);
    return req;
  };
  auto code = [&](const pb::GenerateRequest& r) { return Generate(dec_a_.get(), r).status.error_code(); };
  pb::GenerateRequest r = base();
  r.mutable_model()->set_model_fingerprint(std::string(64, 'f'));
  EXPECT_EQ(code(r), grpc::StatusCode::FAILED_PRECONDITION);
  r = base();
  r.mutable_model()->set_protocol_version(99);
  EXPECT_EQ(code(r), grpc::StatusCode::FAILED_PRECONDITION);
  r = base();
  r.mutable_ns()->set_id("short");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  r.add_tokens(1 << 30);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  r.clear_tokens();
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  r.set_cached_tokens(10);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  r.set_resumed_tokens(10);  // a migrated request with no prompt left
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  r.set_resumed_tokens(4);  // H beyond the prompt [0, 6)
  r.set_cached_tokens(6);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  r.set_unit_tokens(7);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  r.mutable_sampling()->set_temperature(-3);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  for (size_t i = 0; i < kMaxPromptTokens; ++i) r.add_tokens(5);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = base();
  r.set_encoder("127.0.0.1:1");  // nobody there
  EXPECT_EQ(code(r), grpc::StatusCode::UNAVAILABLE);
  {  // the encoder directly
    pb::PrefillRequest pr;
    FillModel(model_->fingerprint(), pr.mutable_model());
    pr.mutable_ns()->set_id(KeyString(ns_.id));
    pr.add_tokens(-1);
    pr.set_unit_tokens(kUnit);
    pb::PrefillResponse resp;
    grpc::ClientContext ctx;
    EXPECT_EQ(pb::Encoder::NewStub(channels_->Get(encoder_->addr))->Prefill(&ctx, pr, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  Reply ok = Generate(dec_a_.get(), base());
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.tokens.size(), 16u);
}

// Speculative decoding (issue 27 item 2) on the tiny-dspark checkpoint: decoders started with
// speculation reply with the plain greedy decode's tokens on every prefix path (none, warm session
// with the SWA state from a peer, cache), and for a migrated request past the window.
class SpeculativeNodesTest : public NodesTest {
 protected:
  static void SetUpTestSuite() {
    model_ = std::move(Model::Open(testing::WriteTestCheckpoint(TinyDsparkConfig(), 1, "nodes-dspark"))).value().release();
  }
  void SetUp() override {
    NodesTest::SetUp();
    // A: a flat cost curve, so every step verifies the whole block (rejections at every position);
    // B: the curve measured at start-up, as a node runs.
    DecoderOptions measured;
    measured.speculative = true;
    dec_b_ = std::make_unique<DecoderServer>(*model_, client_.get(), nodes_.get(), pools_, measured);
    dec_a_ = std::make_unique<DecoderServer>(*model_, client_.get(), nodes_.get(), pools_, WholeBlockOptions());
  }

  // Speculating with a flat cost curve: every step verifies the whole draft block.
  static DecoderOptions WholeBlockOptions() {
    DecoderOptions o;
    o.speculative = true;
    const int block = model_->config().dspark_block_size;
    o.verify_cost = VerifyCostCurve{{1}, {std::vector<double>(static_cast<size_t>(block) + 1, 1.0)}, {0.0}};
    return o;
  }
};

TEST_F(SpeculativeNodesTest, GreedyRepliesEqualPlainDecodeOnEveryPrefixPath) {
  ASSERT_TRUE(dec_a_->core->speculating());
  const int kMax = 24;
  SequenceState ref = SequenceState::Create(model_->config());
  auto p1 = Tokens(20, 71);
  Reply r1 = Turn(dec_a_.get(), "s1", p1, "", 0, kMax);
  ASSERT_TRUE(r1.status.ok()) << r1.status.error_message();
  EXPECT_EQ(r1.tokens, Reference(&ref, p1, kMax));
  EXPECT_EQ(r1.usage.prefix_source(), "none");
  auto p2 = p1;
  p2.insert(p2.end(), r1.tokens.begin(), r1.tokens.end());
  for (int32_t t : Tokens(150, 72)) p2.push_back(t);
  Reply r2 = Turn(dec_a_.get(), "s1", p2, dec_a_->addr, ref.length, kMax);
  ASSERT_TRUE(r2.status.ok()) << r2.status.error_message();
  EXPECT_EQ(r2.usage.prefix_source(), "warm");
  EXPECT_EQ(r2.tokens, Reference(&ref, p2, kMax));
  auto p3 = p2;
  p3.insert(p3.end(), r2.tokens.begin(), r2.tokens.end());
  for (int32_t t : Tokens(100, 73)) p3.push_back(t);
  Reply r3 = Turn(dec_b_.get(), "s1", p3, dec_a_->addr, ref.length, kMax);
  ASSERT_TRUE(r3.status.ok()) << r3.status.error_message();
  EXPECT_EQ(r3.usage.prefix_source(), "cache");
  EXPECT_EQ(r3.tokens, Reference(&ref, p3, kMax));
  // Speculation ran on A: whole blocks verified (random weights reject nearly every draft).
  const double block = model_->config().dspark_block_size;
  EXPECT_GE(dec_a_->spec.drafted_tokens.Value(), 2 * block);
  EXPECT_LE(dec_a_->spec.accepted_tokens.Value(), dec_a_->spec.drafted_tokens.Value());
  EXPECT_GT(dec_a_->spec.position_verified.Add({{"position", "5"}}).Value(), 0);
}

// The speculator adjusts every verified row after counting the drafts accepted before it.
TEST_F(SpeculativeNodesTest, PenaltiesLogitBiasAndLogprobsEqualOneProcess) {
  ASSERT_TRUE(dec_a_->core->speculating());
  const std::vector<int32_t> prompt = Tokens(30, 82);
  SequenceState ref = SequenceState::Create(model_->config());
  const std::vector<int32_t> plain = Reference(&ref, prompt, 20);
  const int32_t favoured = *std::find_if(plain.begin(), plain.end(), [&](int32_t t) { return t != plain[0]; });
  const LogitAdjustments a{2.0f, 1.0f, {{plain[0], -100.0f}, {favoured, 4.0f}}};
  ExpectAdjustedRepliesEqualOneProcess(dec_a_.get(), prompt, a, 20, 2);
  EXPECT_GT(dec_a_->spec.drafted_tokens.Value(), 0);
}

// The speculator masks every verified row with the grammar after the drafts accepted before it.
TEST_F(SpeculativeNodesTest, RepliesWithAResponseFormatFollowTheSchema) { ExpectRepliesFollowTheSchema(WholeBlockOptions()); }

// Greedy constrained replies are the same with and without speculation: drafts are checked against
// the masked rows, so only what the grammar admits is ever accepted.
TEST_F(SpeculativeNodesTest, GreedyConstrainedRepliesEqualPlainDecoding) {
  const JsonVocab vocab = MakeJsonVocab();
  DecoderOptions plain_options, spec_options = WholeBlockOptions();
  plain_options.masker = spec_options.masker = vocab.masker.get();
  DecoderServer plain(*model_, client_.get(), nodes_.get(), pools_, plain_options);
  DecoderServer spec(*model_, client_.get(), nodes_.get(), pools_, spec_options);
  ASSERT_TRUE(spec.core->speculating());
  for (int i = 0; i < 3; ++i) {
    const GenerateInput in = ConstrainedInput(Tokens(25, 300 + i), 0.0f, 0);
    const std::vector<int32_t> want = GeneratedIds(&plain, in);
    EXPECT_EQ(GeneratedIds(&spec, in), want) << vocab.Text(want);
  }
  EXPECT_GT(spec.spec.drafted_tokens.Value(), 0);
}

TEST_F(SpeculativeNodesTest, AMigratedGreedyRequestContinuesAsThePlainRun) {
  const int kTotal = 30, kStreamed = 11;
  const std::vector<int32_t> prompt = Tokens(60, 74);  // past the window (16)
  SequenceState ref = SequenceState::Create(model_->config());
  const std::vector<int32_t> whole = Reference(&ref, prompt, kTotal);
  GenerateInput in;
  in.ns = ns_.id;
  in.tokens = prompt;
  in.tokens.insert(in.tokens.end(), whole.begin(), whole.begin() + kStreamed);
  in.resumed = kStreamed;
  in.encoder = encoder_->addr;
  in.sampling.max_tokens = kTotal - kStreamed;
  in.unit_tokens = kUnit;
  in.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<int32_t> got;
  const GenerateCallResult res = nodes_->Generate(dec_a_->addr, in, nullptr, [&](const GeneratedTokens& got_ids) {
    const std::vector<int32_t>& ids = got_ids.ids;
    got.insert(got.end(), ids.begin(), ids.end());
    return true;
  });
  ASSERT_TRUE(res.status.ok()) << res.status.ToString();
  EXPECT_EQ(got, std::vector<int32_t>(whole.begin() + kStreamed, whole.end()));
}

}  // namespace
}  // namespace ds41
