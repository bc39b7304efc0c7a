// CacheClient over the bulk data path when things go wrong on it: a shard whose data path and gRPC
// both hang costs one deadline, a connection cut as it is reused is replaced without leaving the
// data path, a unit too large for a data-path frame goes over gRPC, a large call to an idle shard
// is split over connections; and DataServer's shutdown closes every connection it counted.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "cache.grpc.pb.h"
#include "cache_client/cache_client.h"
#include "cache_data/wire.h"
#include "cache_service/data_server.h"
#include "cache_service/service.h"
#include "rpc/server.h"
#include "tests/cache/raw_data_client.h"
#include "tests/cache/test_units.h"
#include "tests/support/child_process.h"
#include "tests/support/test_checkpoint.h"
#include "unit/unit_format.h"
#include "util/cancel_token.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {
namespace {

namespace pb = ds41::cache::v1;
using std::chrono::milliseconds;
const std::string kFp(64, 'c');

// A listening socket on loopback (port 0: any); -1 on failure.
int Listen(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A TCP relay in front of a data server that can cut one connection the moment its client sends
// its next request: what a client sees when the server closes a pooled connection for idleness
// just as the client reuses it (a race the client's staleness check cannot see).
class CuttingRelay {
 public:
  explicit CuttingRelay(int target_port) : target_(target_port) {
    listen_fd_ = Listen(&port_);
    accepter_ = std::thread([this] { AcceptLoop(); });
  }
  ~CuttingRelay() {
    shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    accepter_.join();
    std::vector<std::thread> relays;
    {
      MutexLock l(&mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
      relays.swap(relays_);
    }
    for (auto& t : relays) t.join();
    for (int fd : fds_) close(fd);
    close(listen_fd_);
  }
  int port() const { return port_; }
  void CutNextRequest() { cut_ = true; }
  int cuts() const { return cuts_; }

 private:
  void AcceptLoop() {
    for (;;) {
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) return;
      const int server = ConnectLoopback(target_);
      MutexLock l(&mu_);
      fds_.push_back(client);
      if (server < 0) {
        shutdown(client, SHUT_RDWR);
        continue;
      }
      fds_.push_back(server);
      relays_.emplace_back([this, client, server] { Pump(client, server, /*requests=*/true); });
      relays_.emplace_back([this, client, server] { Pump(server, client, /*requests=*/false); });
    }
  }
  // Copies `from` to `to` until either side ends, then ends both.
  void Pump(int from, int to, bool requests) {
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = recv(from, buf, sizeof(buf), 0);
      if (n <= 0) break;
      if (requests && cut_.exchange(false)) {
        ++cuts_;
        break;
      }
      ssize_t sent = 0;
      while (sent < n) {
        const ssize_t w = send(to, buf + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
        if (w <= 0) break;
        sent += w;
      }
      if (sent < n) break;
    }
    shutdown(from, SHUT_RDWR);
    shutdown(to, SHUT_RDWR);
  }

  const int target_;
  int listen_fd_ = -1, port_ = 0;
  std::atomic<bool> cut_{false};
  std::atomic<int> cuts_{0};
  std::thread accepter_;
  Mutex mu_;
  std::vector<int> fds_ DS41_GUARDED_BY(mu_);  // closed once every relay has ended
  std::vector<std::thread> relays_ DS41_GUARDED_BY(mu_);
};

// A real store, data server and gRPC service on loopback; the service advertises `data_port`, so a
// relay can stand in front of the data server.
class CacheClientDataPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions so;
    so.path = testing::TempDir("clientdata");
    store_ = std::move(UnitStore::Open(so, &metrics_)).value();
    data_ = std::move(DataServer::Start({}, store_.get(), &checks_, &data_metrics_, TransportSecurity(), &store_io_)).value();
    ns_ = CacheNamespace::Make(kFp, "tenant");
  }
  void TearDown() override {
    if (rpc_.server) rpc_.server->Shutdown();
  }
  // Starts the gRPC service advertising `data_port`; returns its address.
  std::string StartService(int data_port) {
    CacheServiceOptions co{kFp};
    co.data_port = data_port;
    service_ = std::make_unique<CacheService>(store_.get(), &metrics_, co, &store_io_);
    rpc_ = std::move(StartRpcServer({}, {service_.get()})).value();
    return "127.0.0.1:" + std::to_string(rpc_.port);
  }
  static std::unique_ptr<CacheClient> Client(const std::string& address, bool data_path = true) {
    CacheClientOptions o;
    o.shards = {address};
    o.data_path = data_path;
    return std::move(CacheClient::Create(o)).value();
  }
  std::vector<UnitPut> Units(int full_units, int seed) const {
    return testing::TestPromptUnits(ns_, testing::TestTokens(64 * full_units, seed), seed);
  }

  prometheus::Registry registry_;
  StoreMetrics metrics_{registry_};
  DataPathMetrics data_metrics_{registry_};
  RequestChecks checks_{kFp, 65536};
  std::unique_ptr<UnitStore> store_;
  ThreadPool store_io_{8, ThreadPool::Idle::kSleep, "test-store-io"};  // as CacheNode's
  std::unique_ptr<DataServer> data_;
  std::unique_ptr<CacheService> service_;
  RpcServer rpc_;
  CacheNamespace ns_;
};

// A shard whose data path accepts connections and never answers, and whose gRPC handlers hang.
class HangingShard final : public pb::Cache::Service {
 public:
  explicit HangingShard(int data_port) : data_port_(data_port) {}
  grpc::Status Stats(grpc::ServerContext*, const pb::StatsRequest*, pb::StatsResponse* resp) override {
    resp->set_data_port(static_cast<uint32_t>(data_port_));
    resp->set_data_wire_version(wire::kWireVersion);
    return grpc::Status::OK;
  }
  grpc::Status Put(grpc::ServerContext* ctx, grpc::ServerReaderWriter<pb::PutAck, pb::PutRequest>*) override {
    return Hang(ctx);
  }
  grpc::Status Get(grpc::ServerContext* ctx, const pb::GetRequest*, grpc::ServerWriter<pb::GetResponse>*) override {
    return Hang(ctx);
  }

 private:
  static grpc::Status Hang(grpc::ServerContext* ctx) {
    for (int i = 0; i < 2000 && !ctx->IsCancelled(); ++i) std::this_thread::sleep_for(milliseconds(5));
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "hung");
  }
  const int data_port_;
};

TEST_F(CacheClientDataPathTest, AHangingShardCostsOneDeadlineNotOnePerPath) {
  int data_port = 0;
  const int blackhole = Listen(&data_port);  // never accepts: connects succeed, nothing answers
  ASSERT_GE(blackhole, 0);
  HangingShard shard(data_port);
  RpcServer rpc = std::move(StartRpcServer({}, {&shard})).value();
  CacheClientOptions o;
  o.shards = {"127.0.0.1:" + std::to_string(rpc.port)};
  o.deadline = milliseconds(500);
  auto client = std::move(CacheClient::Create(o)).value();
  const auto units = Units(1, 1);
  ASSERT_EQ(units.size(), 1u);

  auto t0 = std::chrono::steady_clock::now();
  const auto got = client->Get(ns_, {{units[0].key, std::nullopt}});
  const auto get_took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(got[0].has_value());
  t0 = std::chrono::steady_clock::now();
  const PutResult pr = client->Put(ns_, units);
  const auto put_took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(pr.acked, 0);
  EXPECT_EQ(pr.failed, 1);  // reported, not thrown
  // One deadline (500 ms) and some slack; the data path's and then gRPC's retries, each with a
  // deadline of their own, took more than 2 s.
  EXPECT_LT(get_took, milliseconds(900));
  EXPECT_LT(put_took, milliseconds(900));
  rpc.server->Shutdown();
  close(blackhole);
}

TEST_F(CacheClientDataPathTest, LookupsWaitingOnASilentShardHoldNoThread) {
  int port = 0;
  const int blackhole = Listen(&port);  // connects succeed, no HTTP/2 ever: every call runs to its deadline
  ASSERT_GE(blackhole, 0);
  std::atomic<int> answered{0}, down{0};  // before the client: it waits for the callbacks that touch them
  CacheClientOptions o;
  o.shards = {"127.0.0.1:" + std::to_string(port)};
  o.deadline = milliseconds(300);
  o.retries = 1;
  o.backoff = milliseconds(300);
  auto client = std::move(CacheClient::Create(o)).value();
  std::vector<int32_t> tokens(64);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i + 7);
  // One lookup first: gRPC starts its callback threads (a number that depends on the host's cores)
  // with the first asynchronous call.
  EXPECT_EQ(client->LookupPrefix(ns_, tokens, 16).shards_down, 1);

  constexpr int kLookups = 64;
  const int threads_before = testing::ThreadsOf(getpid());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLookups; ++i) {
    client->LookupPrefixAsync(ns_, tokens, 16, nullptr, [&](PrefixHit hit) {
      down += hit.shards_down;
      EXPECT_EQ(hit.tokens, 0);
      ++answered;
    });
  }
  const auto issued = std::chrono::steady_clock::now() - t0;
  const int threads_calling = testing::ThreadsOf(getpid());
  EXPECT_EQ(answered.load(), 0) << "a lookup answered before its shard did";
  EXPECT_LT(issued, milliseconds(250)) << "starting the lookups waited for the shard";
  // In the backoff between the two attempts (300..600 ms): no thread waits it out either.
  std::this_thread::sleep_until(t0 + milliseconds(450));
  const int threads_backing_off = testing::ThreadsOf(getpid());
  EXPECT_EQ(answered.load(), 0);
  // A thread per lookup (or per retry's backoff) would be 64 more.
  EXPECT_LE(threads_calling, threads_before + 2) << threads_before << " -> " << threads_calling;
  EXPECT_LE(threads_backing_off, threads_before + 2) << threads_before << " -> " << threads_backing_off;
  while (answered.load() < kLookups && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    std::this_thread::sleep_for(milliseconds(10));
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(answered.load(), kLookups);
  EXPECT_EQ(down.load(), kLookups) << "a silent shard counts as down, its units as misses";
  // Two attempts of one deadline each and the backoff between them, waited on a timer.
  EXPECT_GE(took, milliseconds(2 * 300 + 300));
  client.reset();  // no shard call is left to outlive it
  close(blackhole);
}

TEST_F(CacheClientDataPathTest, ALookupsCancelTokenEndsItsShardCallsAndRetries) {
  int port = 0;
  const int blackhole = Listen(&port);
  ASSERT_GE(blackhole, 0);
  std::promise<PrefixHit> answer;
  CacheClientOptions o;
  o.shards = {"127.0.0.1:" + std::to_string(port)};
  o.deadline = milliseconds(2000);
  o.retries = 2;
  auto client = std::move(CacheClient::Create(o)).value();
  auto cancel = std::make_shared<CancelToken>();
  const auto t0 = std::chrono::steady_clock::now();
  client->LookupPrefixAsync(ns_, std::vector<int32_t>(64, 9), 16, cancel,
                            [&answer](PrefixHit hit) { answer.set_value(std::move(hit)); });
  std::this_thread::sleep_for(milliseconds(100));
  cancel->Cancel();
  auto got = answer.get_future();
  ASSERT_EQ(got.wait_for(std::chrono::seconds(1)), std::future_status::ready) << "the cancel did not end the lookup";
  EXPECT_EQ(got.get().shards_down, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(1500)) << "it ran to its deadline";
  client.reset();
  close(blackhole);
}

TEST_F(CacheClientDataPathTest, AConnectionCutAsItIsReusedIsReplacedOnTheDataPath) {
  CuttingRelay relay(data_->port());
  auto client = Client(StartService(relay.port()));
  const auto first = Units(4, 2), second = Units(4, 3), third = Units(4, 4);
  ASSERT_EQ(client->Put(ns_, first).acked, 4);
  ASSERT_EQ(data_metrics_.put_ok.Value(), 4) << "the puts did not use the data path";

  relay.CutNextRequest();  // the pooled connection dies under the next call
  const PutResult pr = client->Put(ns_, second);
  EXPECT_EQ(pr.acked, 4);
  EXPECT_TRUE(pr.first_error.ok()) << pr.first_error.ToString();
  EXPECT_EQ(relay.cuts(), 1);
  EXPECT_EQ(data_metrics_.put_ok.Value(), 8) << "the call after the cut left the data path";
  EXPECT_EQ(data_metrics_.connections_accepted.Value(), 2);

  // The shard's data path is not disabled for the calls after it.
  ASSERT_EQ(client->Put(ns_, third).acked, 4);
  EXPECT_EQ(data_metrics_.put_ok.Value(), 12) << "one broken connection turned the data path off";
  std::vector<UnitGet> want;
  for (const auto& u : second) want.push_back({u.key, u.parent});
  const auto got = client->Get(ns_, want);
  for (size_t i = 0; i < second.size(); ++i) EXPECT_EQ(got[i], second[i].bytes) << i;
  EXPECT_EQ(data_metrics_.get_ok.Value(), 1) << "the Get did not use the data path";
  EXPECT_EQ(data_metrics_.connections_accepted.Value(), 2) << "the replacement connection is pooled";
}

TEST_F(CacheClientDataPathTest, AUnitTooLargeForTheDataPathGetsGrpcsAnswer) {
  const std::string address = StartService(data_->port());
  auto client = Client(address);
  auto grpc_only = Client(address, /*data_path=*/false);
  const auto units = Units(3, 5);
  ASSERT_EQ(client->Put(ns_, {units[0]}).acked, 1);
  ASSERT_EQ(data_metrics_.put_ok.Value(), 1);

  const UnitPut huge{units[1].key, std::nullopt, std::string(kMaxUnitBytes + 10, 'x')};
  const PutResult over_data = client->Put(ns_, {huge});
  const PutResult over_grpc = grpc_only->Put(ns_, {huge});
  EXPECT_EQ(over_data.acked, over_grpc.acked);
  EXPECT_EQ(over_data.failed, over_grpc.failed);
  EXPECT_EQ(over_data.first_error.code(), over_grpc.first_error.code());
  EXPECT_EQ(over_data.first_error.code(), StatusCode::kInvalidArgument) << over_data.first_error.ToString();

  // Beside units that fit, in one call: those still go over the data path.
  const PutResult mixed = client->Put(ns_, {units[1], huge});
  EXPECT_EQ(mixed.acked, 1);
  EXPECT_EQ(mixed.failed, 1);
  EXPECT_EQ(mixed.first_error.code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(client->Put(ns_, {units[2]}).acked, 1);
  EXPECT_EQ(data_metrics_.put_ok.Value(), 3) << "the data path was not used after the large unit";
  EXPECT_EQ(data_metrics_.error_framing.Value(), 0) << "the large unit was sent over the data path";
  EXPECT_EQ(data_metrics_.connections_accepted.Value(), 1) << "the data path connection was lost";
  EXPECT_EQ(store_->stats().units, 3u);
}

// Each part of a Get is one GET frame (up to 1,024 keys), so the frames count the parts whatever
// connections they took.
TEST_F(CacheClientDataPathTest, ALargeCallToAnIdleShardIsSplitOverConnections) {
  const std::string address = StartService(data_->port());
  ThreadPool io(2, ThreadPool::Idle::kSleep, "test-io");  // the stripes run on it in parallel
  CacheClientOptions o;
  o.shards = {address};
  o.max_stripes = 2;
  o.io = &io;
  auto client = std::move(CacheClient::Create(o)).value();
  auto keys = [](const std::vector<UnitPut>& units) {
    std::vector<UnitGet> want;
    for (const auto& u : units) want.push_back({u.key, u.parent});
    return want;
  };
  // 63 units make one part (two need 32 each).
  const auto small = Units(63, 6);
  ASSERT_EQ(small.size(), 63u);
  ASSERT_EQ(client->Put(ns_, small).acked, 63);
  ASSERT_EQ(client->Get(ns_, keys(small)).size(), 63u);
  EXPECT_EQ(data_metrics_.get_ok.Value(), 1);
  // 64 go in two parts at once, and 200 in two too (max_stripes): every unit stored and read back
  // in its place.
  const auto large = Units(200, 7);
  const PutResult pr = client->Put(ns_, large);
  EXPECT_EQ(pr.acked, 200);
  EXPECT_EQ(pr.failed, 0);
  EXPECT_EQ(data_metrics_.put_ok.Value(), 263) << "a part left the data path";
  const auto got = client->Get(ns_, keys(large));
  ASSERT_EQ(got.size(), large.size());
  for (size_t i = 0; i < large.size(); ++i) EXPECT_EQ(got[i], large[i].bytes) << i;
  EXPECT_EQ(data_metrics_.get_ok.Value(), 3) << "the Get was not split in two";
  std::vector<UnitGet> first64 = keys(large);
  first64.resize(64);
  ASSERT_EQ(client->Get(ns_, first64).size(), 64u);
  EXPECT_EQ(data_metrics_.get_ok.Value(), 5) << "64 keys were not split in two";
  EXPECT_LE(data_metrics_.connections_accepted.Value(), 2) << "the parts' connections are pooled and reused";

  // max_stripes 1 never splits.
  o.max_stripes = 1;
  auto single = std::move(CacheClient::Create(o)).value();
  ASSERT_EQ(single->Get(ns_, keys(large)).size(), 200u);
  EXPECT_EQ(data_metrics_.get_ok.Value(), 6);
  // Nor does a client without an I/O pool: its stripes would only run one after another.
  o.max_stripes = 2;
  o.io = nullptr;
  auto serial = std::move(CacheClient::Create(o)).value();
  ASSERT_EQ(serial->Get(ns_, keys(large)).size(), 200u);
  EXPECT_EQ(data_metrics_.get_ok.Value(), 7);
}

TEST_F(CacheClientDataPathTest, DataServerShutdownClosesEveryConnection) {
  const std::string address = "127.0.0.1:" + std::to_string(data_->port());
  std::vector<std::unique_ptr<testing::RawDataClient>> conns;
  for (int i = 0; i < 4; ++i) {
    conns.push_back(std::make_unique<testing::RawDataClient>(address));
    ASSERT_TRUE(conns.back()->connected());
  }
  for (int i = 0; i < 500 && data_metrics_.connections_open.Value() < 4; ++i)
    std::this_thread::sleep_for(milliseconds(10));  // until every one is admitted
  ASSERT_EQ(data_metrics_.connections_open.Value(), 4);
  data_.reset();
  EXPECT_EQ(data_metrics_.connections_open.Value(), 0);
  for (auto& c : conns) EXPECT_TRUE(c->ClosedByPeer(milliseconds(5000)));
}

}  // namespace
}  // namespace ds41
