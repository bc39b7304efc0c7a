// cache_service over real gRPC on loopback: in-process for the protocol, and the real binary as a
// child process for crash safety (kill -9 mid-stream), sharding with a dead shard, and /metrics.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "cache.grpc.pb.h"
#include "cache_client/cache_client.h"
#include "cache_data/wire.h"
#include "cache_service/service.h"
#include "rpc/server.h"
#include "tests/cache/raw_data_client.h"
#include "tests/cache/test_units.h"
#include "tests/support/child_process.h"
#include "tests/support/test_checkpoint.h"
#include "unit/reply_record.h"
#include "unit/unit_format.h"
#include "unit/unit_key.h"

namespace ds41 {
namespace {

namespace pb = ds41::cache::v1;
const std::string kFp(64, 'a');

std::string UnitBytes(int64_t first, int tokens, uint32_t seed) { return testing::TestUnitBytes(kFp, first, tokens, seed); }
std::vector<int32_t> Tokens(int n, int seed) { return testing::TestTokens(n, seed); }
std::vector<UnitPut> PromptUnits(const CacheNamespace& ns, const std::vector<int32_t>& t, int seed) {
  return testing::TestPromptUnits(ns, t, seed);
}

class InProcessCache : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions so;
    so.path = testing::TempDir("cachesvc");
    store_ = std::move(UnitStore::Open(so, &metrics_)).value();
    service_ = std::make_unique<CacheService>(store_.get(), &metrics_, CacheServiceOptions{kFp}, &store_io_);
    server_ = std::move(StartRpcServer({}, {service_.get()})).value();
    addr_ = "127.0.0.1:" + std::to_string(server_.port);
    client_ = std::move(CacheClient::Create({{addr_}})).value();
    stub_ = pb::Cache::NewStub(grpc::CreateChannel(addr_, grpc::InsecureChannelCredentials()));
    ns_ = CacheNamespace::Make(kFp, "tenant-1");
  }
  void TearDown() override { server_.server->Shutdown(); }

  pb::Namespace Ns() const {
    pb::Namespace n;
    n.set_id(std::string(reinterpret_cast<const char*>(ns_.id.data()), 32));
    n.set_model_fingerprint(kFp);
    n.set_format_version(kUnitFormatVersion);
    return n;
  }
  grpc::Status RawPut(const pb::PutRequest& r) {
    grpc::ClientContext ctx;
    auto s = stub_->Put(&ctx);
    s->Write(r);
    s->WritesDone();
    pb::PutAck a;
    while (s->Read(&a)) {
    }
    return s->Finish();
  }

  prometheus::Registry registry_;
  StoreMetrics metrics_{registry_};
  std::unique_ptr<UnitStore> store_;
  ThreadPool store_io_{8, ThreadPool::Idle::kSleep, "test-store-io"};  // as CacheNode's
  std::unique_ptr<CacheService> service_;
  RpcServer server_;
  std::string addr_;
  std::unique_ptr<CacheClient> client_;
  std::unique_ptr<pb::Cache::Stub> stub_;
  CacheNamespace ns_;
};

TEST_F(InProcessCache, RoundTripAndLongestPrefixWithTail) {
  const auto turn1 = Tokens(150, 1);  // 2 full units + a 22-token tail
  const auto units = PromptUnits(ns_, turn1, 1);
  ASSERT_EQ(units.size(), 3u);
  PutResult pr = client_->Put(ns_, units);
  EXPECT_EQ(pr.acked, 3);
  EXPECT_TRUE(pr.first_error.ok()) << pr.first_error.ToString();

  // The next turn extends the context: its hit covers the whole previous turn, tail included.
  auto turn2 = turn1;
  for (int i = 0; i < 90; ++i) turn2.push_back(7);
  PrefixHit h = client_->LookupPrefix(ns_, turn2, 64);
  EXPECT_EQ(h.full_units, 2);
  EXPECT_EQ(h.tail_tokens, 22);
  EXPECT_EQ(h.tokens, 150);
  EXPECT_EQ(h.shards_down, 0);
  // A prompt that diverges inside the tail hits only the full units.
  auto other = turn1;
  other[140] += 1;
  EXPECT_EQ(client_->LookupPrefix(ns_, other, 64).tokens, 128);
  // Another tenant sees nothing.
  EXPECT_EQ(client_->LookupPrefix(CacheNamespace::Make(kFp, "tenant-2"), turn2, 64).tokens, 0);

  auto got = client_->Get(ns_, {{units[0].key, std::nullopt}, {units[2].key, units[1].key}, {TailKey(ns_.id, turn1.data(), 3), ns_.id}});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], units[0].bytes);
  EXPECT_EQ(got[1], units[2].bytes);
  EXPECT_FALSE(got[2].has_value());
  auto decoded = DecodeUnit(testing::TestLayout(), *got[1]);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->tokens, 22);
  EXPECT_GT(metrics_.hit_tokens.Value(), 0);
  EXPECT_EQ(*client_->DeleteNamespace(ns_), 3u);
  EXPECT_EQ(client_->LookupPrefix(ns_, turn2, 64).tokens, 0);
}

TEST_F(InProcessCache, BadRequestsAreInvalidArgumentAndTheServerStaysUp) {
  const std::string good = UnitBytes(0, 64, 3);
  UnitKey key = ChainKey(ns_.id, Tokens(64, 3).data(), 64);
  auto put = [&](auto edit) {
    pb::PutRequest r;
    *r.mutable_ns() = Ns();
    r.mutable_ref()->set_key(std::string(reinterpret_cast<const char*>(key.data()), 32));
    r.set_unit(good);
    edit(r);
    return RawPut(r).error_code();
  };
  const auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  EXPECT_EQ(put([](pb::PutRequest&) {}), grpc::StatusCode::OK);
  EXPECT_EQ(put([](pb::PutRequest& r) { r.mutable_ns()->set_id("short"); }), kInvalid);
  EXPECT_EQ(put([](pb::PutRequest& r) { r.mutable_ns()->set_model_fingerprint(std::string(64, 'b')); }), kInvalid);
  EXPECT_EQ(put([](pb::PutRequest& r) { r.mutable_ns()->set_model_fingerprint("zz"); }), kInvalid);
  EXPECT_EQ(put([](pb::PutRequest& r) { r.mutable_ns()->set_format_version(99); }), kInvalid);
  EXPECT_EQ(put([](pb::PutRequest& r) { r.mutable_ref()->set_key("k"); }), kInvalid);
  EXPECT_EQ(put([](pb::PutRequest& r) { r.set_unit("garbage"); }), kInvalid);
  EXPECT_EQ(put([&](pb::PutRequest& r) {
              std::string b = good;
              b[100] ^= 1;
              r.set_unit(b);
            }),
            kInvalid);
  EXPECT_EQ(put([&](pb::PutRequest& r) { r.set_unit(std::string(kMaxUnitBytes + 10, 'x')); }), kInvalid);
  EXPECT_EQ(put([&](pb::PutRequest& r) { r.mutable_ref()->set_parent(std::string(32, 'p')); }), kInvalid);  // full unit as tail
  {
    grpc::ClientContext ctx;
    pb::LookupRequest lr;
    *lr.mutable_ns() = Ns();
    for (int i = 0; i < 70000; ++i) lr.add_keys(std::string(32, 'k'));
    pb::LookupResponse resp;
    EXPECT_EQ(stub_->Lookup(&ctx, lr, &resp).error_code(), kInvalid);
  }
  {
    grpc::ClientContext ctx;
    pb::LookupRequest lr;
    *lr.mutable_ns() = Ns();
    lr.add_keys("tiny");
    pb::LookupResponse resp;
    EXPECT_EQ(stub_->Lookup(&ctx, lr, &resp).error_code(), kInvalid);
  }
  {
    grpc::ClientContext ctx;
    pb::GetRequest gr;
    gr.mutable_ns()->set_id("x");
    auto rd = stub_->Get(&ctx, gr);
    pb::GetResponse r;
    while (rd->Read(&r)) {
    }
    EXPECT_EQ(rd->Finish().error_code(), kInvalid);
  }
  grpc::ClientContext ctx;
  pb::StatsResponse st;
  ASSERT_TRUE(stub_->Stats(&ctx, pb::StatsRequest(), &st).ok());
  EXPECT_EQ(st.units(), 1u);  // only the good unit
}

TEST_F(InProcessCache, MessagesOverTheListenersLimitAreRefusedByTransport) {
  // Every gRPC listener caps a received message (rpc/server.h, 64 MiB); beyond it gRPC refuses the
  // call before any handler sees it, and the server goes on.
  pb::PutRequest r;
  *r.mutable_ns() = Ns();
  r.mutable_ref()->set_key(std::string(32, 'k'));
  r.set_unit(std::string((64u << 20) + 1024, 'x'));
  EXPECT_EQ(RawPut(r).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext ctx;
  pb::StatsResponse st;
  EXPECT_TRUE(stub_->Stats(&ctx, pb::StatsRequest(), &st).ok());
}

TEST_F(InProcessCache, ReplyRecordsRideBesideUnitsPerTenant) {
  const Fingerprint fp = *ParseFingerprint(kFp);
  const std::vector<int32_t> ids = {11, 12, 13, 1};
  std::array<uint8_t, 32> digest{};
  digest[0] = 7;
  const UnitKey key = ReplyKey(ns_.id, digest);
  PutResult pr = client_->Put(ns_, {{key, std::nullopt, EncodeReplyRecord(fp, ids)}});
  EXPECT_EQ(pr.acked, 1) << pr.first_error.ToString();
  auto got = client_->Get(ns_, {{key, std::nullopt}});
  ASSERT_TRUE(got[0].has_value());
  auto back = DecodeReplyRecord(*got[0], fp, 100);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, ids);
  // Another tenant's key for the same digest finds nothing, and neither does its namespace.
  const CacheNamespace other = CacheNamespace::Make(kFp, "tenant-2");
  EXPECT_FALSE(client_->Get(other, {{ReplyKey(other.id, digest), std::nullopt}})[0].has_value());
  EXPECT_FALSE(client_->Get(other, {{key, std::nullopt}})[0].has_value());
  // Refused: another model's record, a damaged one, a record put as a tail.
  Fingerprint fp2 = fp;
  fp2[0] = 0;
  EXPECT_EQ(client_->Put(ns_, {{key, std::nullopt, EncodeReplyRecord(fp2, ids)}}).acked, 0);
  std::string bad = EncodeReplyRecord(fp, ids);
  bad[50] ^= 1;
  EXPECT_EQ(client_->Put(ns_, {{key, std::nullopt, bad}}).acked, 0);
  EXPECT_EQ(client_->Put(ns_, {{key, ns_.id, EncodeReplyRecord(fp, ids)}}).acked, 0);
  // Deleting the namespace removes its records with its units.
  EXPECT_EQ(*client_->DeleteNamespace(ns_), 1u);
  EXPECT_FALSE(client_->Get(ns_, {{key, std::nullopt}})[0].has_value());
}

// The real binary on ephemeral ports; its bulk data path on (a free port, as gRPC's) or off.
std::vector<std::string> ServerArgs(const std::string& dir, bool data_path = true) {
  std::vector<std::string> a = {testing::BinaryDir() + "/cache_service/cache_service", "--listen", "127.0.0.1:0",
                                "--metrics-listen", "127.0.0.1:0", "--path", dir, "--model-fingerprint", kFp};
  if (!data_path) a.insert(a.end(), {"--data-listen", "off"});
  return a;
}

// 2000 distinct full units to stream at a server that is killed part way.
std::vector<std::pair<UnitKey, std::string>> CrashUnits(const CacheNamespace& ns) {
  std::vector<std::pair<UnitKey, std::string>> sent;
  for (int i = 0; i < 2000; ++i) {
    const auto t = Tokens(64, 1000 + i);
    sent.push_back({ChainKey(ns.id, t.data(), 64), UnitBytes(0, 64, static_cast<uint32_t>(i))});
  }
  return sent;
}

// Starts the server again (`args`) and checks that the first `acked` units of `sent` are all there, intact.
void ExpectAcknowledgedUnitsAfterRestart(const std::vector<std::string>& args, const CacheNamespace& ns,
                                         const std::vector<std::pair<UnitKey, std::string>>& sent, int acked,
                                         const char* path) {
  testing::ChildProcess server(args, "cache_service ready");
  ASSERT_TRUE(server.ready());
  auto client = std::move(CacheClient::Create({{server.fields()["grpc"]}})).value();
  std::vector<UnitGet> want;
  for (int i = 0; i < acked; ++i) want.push_back({sent[i].first, std::nullopt});
  auto got = client->Get(ns, want);
  int intact = 0;
  for (int i = 0; i < acked; ++i) intact += got[i].has_value() && *got[i] == sent[i].second;
  EXPECT_EQ(intact, acked) << "units acknowledged over " << path << " lost or damaged by kill -9";
  std::printf("[ crash ] %s: %d units acknowledged before kill -9, %d present and intact after restart\n", path, acked,
              intact);
}

TEST(CacheServiceProcessTest, AcknowledgedUnitsSurviveKill9) {
  const std::string dir = testing::TempDir("crash");
  auto server = std::make_unique<testing::ChildProcess>(ServerArgs(dir, false), "cache_service ready");
  ASSERT_TRUE(server->ready());
  const std::string addr = server->fields()["grpc"];
  auto stub = pb::Cache::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  const CacheNamespace ns = CacheNamespace::Make(kFp, "t");
  // Stream distinct units; count acknowledgements; kill -9 the server after 150 of them while
  // more writes are in flight.
  const auto sent = CrashUnits(ns);
  grpc::ClientContext ctx;
  auto stream = stub->Put(&ctx);
  std::atomic<int> acked{0};
  std::thread reader([&] {
    pb::PutAck a;
    while (stream->Read(&a)) {
      EXPECT_EQ(a.seq(), static_cast<uint64_t>(acked.load()));
      ++acked;
    }
  });
  for (const auto& [k, b] : sent) {
    pb::PutRequest r;
    r.mutable_ns()->set_id(std::string(reinterpret_cast<const char*>(ns.id.data()), 32));
    r.mutable_ns()->set_model_fingerprint(kFp);
    r.mutable_ns()->set_format_version(kUnitFormatVersion);
    r.mutable_ref()->set_key(std::string(reinterpret_cast<const char*>(k.data()), 32));
    r.set_unit(b);
    if (!stream->Write(r)) break;
    if (acked.load() >= 150) break;
  }
  server->Kill(SIGKILL);
  reader.join();
  stream->Finish().IgnoreError();
  const int n_acked = acked.load();
  ASSERT_GE(n_acked, 150);
  ExpectAcknowledgedUnitsAfterRestart(ServerArgs(dir, false), ns, sent, n_acked, "gRPC");
}

// The same guarantee over the bulk data path: a PUT_OK is sent only once the unit is committed.
TEST(CacheServiceProcessTest, UnitsAcknowledgedOverTheDataPathSurviveKill9) {
  const std::string dir = testing::TempDir("datacrash");
  auto server = std::make_unique<testing::ChildProcess>(ServerArgs(dir), "cache_service ready");
  ASSERT_TRUE(server->ready());
  const CacheNamespace ns = CacheNamespace::Make(kFp, "t");
  const wire::NamespaceView wns{std::string_view(reinterpret_cast<const char*>(ns.id.data()), 32), kFp, kUnitFormatVersion};
  const auto sent = CrashUnits(ns);
  testing::RawDataClient conn(server->fields()["data"]);
  ASSERT_TRUE(conn.connected());
  std::atomic<int> acked{0};
  std::thread reader([&] {
    while (auto f = conn.Read(std::chrono::seconds(20))) {
      if (f->header.op != wire::Op::kPutOk) break;
      EXPECT_EQ(f->header.id, static_cast<uint32_t>(acked.load() + 1));
      ++acked;
    }
  });
  for (size_t i = 0; i < sent.size() && acked.load() < 150; ++i) {
    const std::string key(reinterpret_cast<const char*>(sent[i].first.data()), 32);
    if (!conn.Send(wire::EncodePutPrefix(static_cast<uint32_t>(i + 1), wns, key, "", sent[i].second.size()) + sent[i].second))
      break;
  }
  for (int i = 0; i < 1000 && acked.load() < 150; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  server->Kill(SIGKILL);
  reader.join();
  const int n_acked = acked.load();
  ASSERT_GE(n_acked, 150);
  ExpectAcknowledgedUnitsAfterRestart(ServerArgs(dir), ns, sent, n_acked, "the data path");
}

// A shard killed while the client streams units from it over the data path: what arrived is
// intact, the rest are misses, and nothing is an error.
TEST(CacheServiceProcessTest, ShardKilledMidStreamOverTheDataPathIsMisses) {
  auto server = std::make_unique<testing::ChildProcess>(ServerArgs(testing::TempDir("midstream")), "cache_service ready");
  ASSERT_TRUE(server->ready());
  CacheClientOptions o;
  o.shards = {server->fields()["grpc"]};
  o.deadline = std::chrono::milliseconds(1500);
  auto client = std::move(CacheClient::Create(o)).value();
  const CacheNamespace ns = CacheNamespace::Make(kFp, "t");
  const auto units = PromptUnits(ns, Tokens(64 * 400, 8), 8);
  ASSERT_EQ(client->Put(ns, units).acked, static_cast<int>(units.size()));
  // (What follows is about the data path: the puts must have taken it.)
  const std::string metrics = testing::HttpGet(server->fields()["metrics"], "/metrics");
  ASSERT_NE(metrics.find("ds41_cache_data_frames_total{opcode=\"put\",result=\"ok\"} " + std::to_string(units.size())),
            std::string::npos)
      << "the puts did not use the data path";
  std::vector<UnitGet> all;
  for (const auto& u : units) all.push_back({u.key, u.parent});
  std::atomic<bool> killed{false};
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    server->Kill(SIGKILL);
    killed = true;
  });
  int rounds_after_kill = 0;
  while (rounds_after_kill < 2) {
    const bool was_killed = killed.load();
    auto got = client->Get(ns, all);
    for (size_t i = 0; i < units.size(); ++i) {
      if (got[i].has_value()) {
        ASSERT_EQ(*got[i], units[i].bytes) << i;
      }
    }
    if (was_killed) {
      ++rounds_after_kill;
      EXPECT_EQ(std::count_if(got.begin(), got.end(), [](const auto& g) { return g.has_value(); }), 0);
    }
  }
  killer.join();
  PutResult pr = client->Put(ns, units);
  EXPECT_EQ(pr.acked, 0);
  EXPECT_EQ(pr.failed, static_cast<int>(units.size()));  // reported, not thrown
}

TEST(CacheServiceProcessTest, ThreeShardsWithOneKilledDegradeToMisses) {
  std::vector<std::unique_ptr<testing::ChildProcess>> shards;
  std::vector<std::string> addrs;
  for (int i = 0; i < 3; ++i) {
    shards.push_back(std::make_unique<testing::ChildProcess>(ServerArgs(testing::TempDir("shard")), "cache_service ready"));
    ASSERT_TRUE(shards.back()->ready());
    addrs.push_back(shards.back()->fields()["grpc"]);
  }
  CacheClientOptions o;
  o.shards = addrs;
  o.deadline = std::chrono::milliseconds(1500);
  auto client = std::move(CacheClient::Create(o)).value();
  const CacheNamespace ns = CacheNamespace::Make(kFp, "t");
  const auto prompt = Tokens(64 * 30 + 10, 5);
  const auto units = PromptUnits(ns, prompt, 5);
  PutResult pr = client->Put(ns, units);
  ASSERT_EQ(pr.acked, static_cast<int>(units.size()));
  EXPECT_EQ(client->LookupPrefix(ns, prompt, 64).tokens, static_cast<int64_t>(prompt.size()));
  std::set<int> owners;
  for (const auto& u : units) owners.insert(client->OwnerOf(u.parent ? *u.parent : u.key));
  EXPECT_EQ(owners.size(), 3u) << "rendezvous should spread 31 units over 3 shards";

  // Scrape one shard's /metrics while it is alive.
  const std::string metrics = testing::HttpGet(shards[0]->fields()["metrics"], "/metrics");
  EXPECT_NE(metrics.find("ds41_store_lookups_total"), std::string::npos);
  EXPECT_NE(metrics.find("ds41_store_units"), std::string::npos);
  EXPECT_NE(metrics.find("ds41_cache_data_frames_total{opcode=\"put\",result=\"ok\"} "), std::string::npos);
  EXPECT_EQ(metrics.find("ds41_cache_data_frames_total{opcode=\"put\",result=\"ok\"} 0"), std::string::npos)
      << "the puts did not use the data path";

  shards[1]->Kill(SIGKILL);
  int first_dead = -1;
  for (size_t i = 0; i < units.size() && first_dead < 0; ++i)
    if (client->OwnerOf(units[i].parent ? *units[i].parent : units[i].key) == 1) first_dead = static_cast<int>(i);
  PrefixHit h = client->LookupPrefix(ns, prompt, 64);  // no error: the dead shard's units are misses
  EXPECT_EQ(h.shards_down, 1);
  EXPECT_EQ(h.full_units, first_dead);
  std::vector<UnitGet> all;
  for (const auto& u : units) all.push_back({u.key, u.parent});
  auto got = client->Get(ns, all);
  for (size_t i = 0; i < units.size(); ++i) {
    const bool on_dead = client->OwnerOf(units[i].parent ? *units[i].parent : units[i].key) == 1;
    EXPECT_EQ(got[i].has_value(), !on_dead) << i;
  }
  PutResult again = client->Put(ns, PromptUnits(ns, Tokens(200, 9), 9));
  EXPECT_EQ(again.acked + again.failed, 4);  // reported, not thrown
}

}  // namespace
}  // namespace ds41
