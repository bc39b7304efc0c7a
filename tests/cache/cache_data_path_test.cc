// The cache's bulk data path in process, beside the real gRPC service: round trips through the
// shared client, misses, corrupt units, the same validation as gRPC, malformed and random bytes,
// timeouts, and the fallback to gRPC when the data path goes away.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "cache_client/cache_client.h"
#include "cache_data/wire.h"
#include "cache_service/data_server.h"
#include "cache_service/service.h"
#include "rpc/server.h"
#include "tests/cache/raw_data_client.h"
#include "tests/cache/test_units.h"
#include "tests/support/test_checkpoint.h"
#include "unit/unit_key.h"

namespace ds41 {
namespace {

using std::chrono::milliseconds;
const std::string kFp(64, 'd');

class DataPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir("datapath");
    StoreOptions so;
    so.path = dir_;
    store_ = std::move(UnitStore::Open(so, &metrics_)).value();
    data_ = StartDataServer(milliseconds(20000));
    data_addr_ = "127.0.0.1:" + std::to_string(data_->port());
    CacheServiceOptions co{kFp};
    co.data_port = data_->port();
    service_ = std::make_unique<CacheService>(store_.get(), &metrics_, co, &store_io_);
    server_ = std::move(StartRpcServer({}, {service_.get()})).value();
    CacheClientOptions o;
    o.shards = {"127.0.0.1:" + std::to_string(server_.port)};
    o.deadline = milliseconds(2000);
    client_ = std::move(CacheClient::Create(o)).value();
    ns_ = CacheNamespace::Make(kFp, "tenant");
  }
  void TearDown() override {
    server_.server->Shutdown();
    data_.reset();
  }
  std::unique_ptr<DataServer> StartDataServer(milliseconds timeouts, int64_t max_held_bytes = int64_t{512} << 20,
                                              size_t max_connections = 512) {
    DataServerOptions d;
    d.max_connections = max_connections;
    d.idle_timeout = timeouts;
    d.io_timeout = timeouts;
    d.max_held_bytes = max_held_bytes;
    return std::move(DataServer::Start(d, store_.get(), &checks_, &data_metrics_, TransportSecurity(), &store_io_)).value();
  }
  wire::NamespaceView Ns() const {
    return {std::string_view(reinterpret_cast<const char*>(ns_.id.data()), 32), kFp, kUnitFormatVersion};
  }
  static std::string Key(const UnitKey& k) { return std::string(reinterpret_cast<const char*>(k.data()), 32); }
  std::string PutFrame(uint32_t id, const UnitPut& u) const {
    return wire::EncodePutPrefix(id, Ns(), Key(u.key), u.parent ? Key(*u.parent) : "", u.bytes.size()) + u.bytes;
  }
  // The answers to PUTs of `units` (ids first_put, first_put + 1, ...) then to one GET of them all
  // (id get): a PUT_OK each, then each unit, in order.
  void ExpectPutsThenUnits(testing::RawDataClient& c, const std::vector<UnitPut>& units, uint32_t first_put, uint32_t get) {
    for (size_t i = 0; i < units.size(); ++i) {
      auto f = c.Read(milliseconds(5000));
      ASSERT_TRUE(f.has_value()) << i;
      EXPECT_EQ(f->header.op, wire::Op::kPutOk);
      EXPECT_EQ(f->header.id, first_put + i);
    }
    for (size_t i = 0; i < units.size(); ++i) {
      auto f = c.Read(milliseconds(5000));
      ASSERT_TRUE(f.has_value()) << i;
      EXPECT_EQ(f->header.id, get);
      auto u = wire::ParseUnit(f->body);
      ASSERT_TRUE(u.ok());
      EXPECT_EQ(u->key, Key(units[i].key));
      EXPECT_EQ(u->bytes, units[i].bytes) << i;
    }
  }
  // One PUT and one GET over a fresh connection, answered correctly.
  void ExpectServesACorrectClient(const std::string& addr, const UnitPut& u) {
    testing::RawDataClient c(addr);
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.Send(PutFrame(1, u)));
    auto ack = c.Read(milliseconds(5000));
    ASSERT_TRUE(ack.has_value());
    EXPECT_EQ(ack->header.op, wire::Op::kPutOk);
    ASSERT_TRUE(c.Send(wire::EncodeGet(2, Ns(), Key(u.key))));
    auto got = c.Read(milliseconds(5000));
    ASSERT_TRUE(got.has_value());
    auto unit = wire::ParseUnit(got->body);
    ASSERT_TRUE(unit.ok());
    EXPECT_EQ(unit->result, wire::UnitResult::kFound);
    EXPECT_EQ(unit->bytes, u.bytes);
  }

  std::string dir_;
  prometheus::Registry registry_;
  StoreMetrics metrics_{registry_};
  DataPathMetrics data_metrics_{registry_};
  RequestChecks checks_{kFp, 65536};
  std::unique_ptr<UnitStore> store_;
  ThreadPool store_io_{8, ThreadPool::Idle::kSleep, "test-store-io"};  // as CacheNode's
  std::unique_ptr<DataServer> data_;
  std::string data_addr_;
  std::unique_ptr<CacheService> service_;
  RpcServer server_;
  std::unique_ptr<CacheClient> client_;
  CacheNamespace ns_;
};

TEST_F(DataPathTest, RoundTripMissAndCorruptUnitThroughTheClient) {
  const auto prompt = testing::TestTokens(64 * 40 + 20, 1);
  const auto units = testing::TestPromptUnits(ns_, prompt, 1);
  const PutResult pr = client_->Put(ns_, units);
  EXPECT_EQ(pr.acked, static_cast<int>(units.size()));
  EXPECT_TRUE(pr.first_error.ok()) << pr.first_error.ToString();
  EXPECT_EQ(data_metrics_.put_ok.Value(), static_cast<double>(units.size())) << "the puts did not use the data path";
  EXPECT_EQ(client_->LookupPrefix(ns_, prompt, 64).tokens, static_cast<int64_t>(prompt.size()));

  std::vector<UnitGet> want;
  for (const auto& u : units) want.push_back({u.key, u.parent});
  want.push_back({TailKey(ns_.id, prompt.data(), 3), ns_.id});  // never stored
  auto got = client_->Get(ns_, want);
  ASSERT_EQ(got.size(), units.size() + 1);
  for (size_t i = 0; i < units.size(); ++i) EXPECT_EQ(got[i], units[i].bytes) << i;
  EXPECT_FALSE(got.back().has_value());
  EXPECT_EQ(data_metrics_.get_ok.Value(), 1);
  // (bytes_out is counted once the server's write completes, which may be after the client has read
  // the bytes: wait for it.)
  for (int i = 0; i < 500 && data_metrics_.bytes_out.Value() <= 40.0 * units[0].bytes.size(); ++i)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_GT(data_metrics_.bytes_out.Value(), 40.0 * units[0].bytes.size());
  EXPECT_EQ(data_metrics_.connections_accepted.Value(), 1) << "connections are pooled";

  // Flip one payload byte of the first unit behind the store's back: a counted miss, deleted.
  std::vector<std::filesystem::path> segs;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/segments")) segs.push_back(e.path());
  ASSERT_EQ(segs.size(), 1u);
  {
    // (Puts run concurrently: where the unit was appended is looked up, not assumed.)
    std::fstream f(segs[0], std::ios::in | std::ios::out | std::ios::binary);
    const std::string seg((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t at = seg.find(units[0].bytes);
    ASSERT_NE(at, std::string::npos);
    const auto off = static_cast<std::streamoff>(at + units[0].bytes.size() / 2);
    f.clear();
    f.seekp(off);
    f.put(static_cast<char>(seg[static_cast<size_t>(off)] ^ 0x40));
  }
  auto again = client_->Get(ns_, {{units[0].key, std::nullopt}, {units[1].key, std::nullopt}});
  EXPECT_FALSE(again[0].has_value()) << "a corrupt unit was served";
  EXPECT_EQ(again[1], units[1].bytes);
  EXPECT_EQ(metrics_.checksum_failures.Value(), 1);
  EXPECT_EQ(client_->LookupPrefix(ns_, prompt, 64).tokens, 0) << "the corrupt unit is still indexed";
}

TEST_F(DataPathTest, RefusesWhatGrpcRefusesAndKeepsTheConnection) {
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 + 10, 2), 2);  // a full unit and a tail
  testing::RawDataClient c(data_addr_);
  ASSERT_TRUE(c.connected());
  auto expect_refused = [&](const std::string& frame) {
    ASSERT_TRUE(c.Send(frame));
    auto f = c.Read(milliseconds(5000));
    ASSERT_TRUE(f.has_value());
    ASSERT_EQ(f->header.op, wire::Op::kError);
    EXPECT_EQ(f->header.flags, 0);
    EXPECT_EQ(wire::ParseError(f->body).code(), StatusCode::kInvalidArgument);
  };
  const std::string other_fp(64, 'e');
  const std::string key = Key(units[0].key), unit = units[0].bytes;
  expect_refused(wire::EncodePutPrefix(1, {Ns().id, other_fp, kUnitFormatVersion}, key, "", unit.size()) + unit);
  expect_refused(wire::EncodePutPrefix(2, {Ns().id, kFp, 99}, key, "", unit.size()) + unit);
  expect_refused(wire::EncodePutPrefix(3, {Ns().id, std::string(64, 'z'), kUnitFormatVersion}, key, "", unit.size()) + unit);
  expect_refused(wire::EncodePutPrefix(4, Ns(), key, "", 7) + "garbage");
  std::string flipped = unit;
  flipped[100] ^= 1;
  expect_refused(wire::EncodePutPrefix(5, Ns(), key, "", flipped.size()) + flipped);
  expect_refused(wire::EncodePutPrefix(6, Ns(), key, std::string(32, 'p'), unit.size()) + unit);  // full unit as a tail
  expect_refused(wire::EncodePutPrefix(7, Ns(), Key(units[1].key), "", units[1].bytes.size()) + units[1].bytes);  // tail, no parent
  expect_refused(wire::EncodeGet(8, {Ns().id, other_fp, kUnitFormatVersion}, key));
  EXPECT_EQ(data_metrics_.put_rejected.Value(), 7);
  EXPECT_EQ(store_->stats().units, 0u);
  // The same connection still works.
  ASSERT_TRUE(c.Send(PutFrame(9, units[0])));
  auto ok = c.Read(milliseconds(5000));
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->header.op, wire::Op::kPutOk);
  EXPECT_EQ(ok->header.id, 9u);
}

// Many requests written before any answer is read, then the client's side closed: every answer
// arrives, in request order, then the server closes.
TEST_F(DataPathTest, PipelinedRequestsAreAnsweredInOrderThenTheConnectionCloses) {
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 * 30, 9), 9);
  testing::RawDataClient c(data_addr_);
  ASSERT_TRUE(c.connected());
  std::string all, keys;
  for (size_t i = 0; i < units.size(); ++i) {
    all += PutFrame(static_cast<uint32_t>(100 + i), units[i]);
    keys += Key(units[i].key);
  }
  all += wire::EncodeGet(500, Ns(), keys);
  std::thread writer([&] {
    ASSERT_TRUE(c.Send(all));
    c.HalfClose();
  });
  ExpectPutsThenUnits(c, units, 100, 500);
  writer.join();
  EXPECT_TRUE(c.ClosedByPeer(milliseconds(5000)));
}

// The server reads a body's end together with whatever of the next header has arrived: each frame
// here is cut k = 0..17 bytes past its start (no header byte, part of one, all of it, more), the
// pieces sent 1 ms apart so that each arrives as one read.
TEST_F(DataPathTest, FramesCutAtAnyByteOfTheirHeaderAreAnsweredAlike) {
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 * 18, 11), 11);
  testing::RawDataClient c(data_addr_);
  ASSERT_TRUE(c.connected());
  std::string all, keys;
  std::vector<size_t> cuts;
  for (size_t i = 0; i < units.size(); ++i) {
    if (i > 0) cuts.push_back(all.size() + i % 18);
    all += PutFrame(static_cast<uint32_t>(10 + i), units[i]);
    keys += Key(units[i].key);
  }
  cuts.push_back(all.size() + 5);
  all += wire::EncodeGet(50, Ns(), keys);
  cuts.push_back(all.size());
  std::thread writer([&] {
    size_t at = 0;
    for (size_t cut : cuts) {
      ASSERT_TRUE(c.Send(std::string_view(all).substr(at, cut - at)));
      at = cut;
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  ExpectPutsThenUnits(c, units, 10, 50);
  writer.join();
}

// The server reads into 4 MiB chunks and stores PUTs from them in place: a burst of PUTs several
// chunks long (frames cut at chunk ends while earlier ones are still being stored from the same
// chunk; under a spent budget, the chunk moved back to its start once they are done), then a frame
// larger than a chunk sent in pieces (its buffer grown as they arrive), are answered whole and in
// order, and the connection goes on serving.
TEST_F(DataPathTest, BurstsLongerThanAChunkAndFramesLargerThanOneAreReadWhole) {
  const size_t unit_bytes = testing::TestPromptUnits(ns_, testing::TestTokens(64, 12), 12)[0].bytes.size();
  const size_t count = (10 << 20) / unit_bytes + 1;  // ~2.5 chunks
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 * count, 12), 12);
  ASSERT_EQ(units.size(), count);
  std::string all, keys;
  for (size_t i = 0; i < units.size(); ++i) {
    all += PutFrame(static_cast<uint32_t>(1000 + i), units[i]);
    keys += Key(units[i].key);
  }
  all += wire::EncodeGet(99, Ns(), keys);
  {  // A budget of one byte: past the first full chunk, none may be taken (the one in use is reused).
    const auto tight = StartDataServer(milliseconds(20000), 1);
    testing::RawDataClient t("127.0.0.1:" + std::to_string(tight->port()));
    ASSERT_TRUE(t.connected());
    std::thread writer([&] { ASSERT_TRUE(t.Send(all)); });
    ExpectPutsThenUnits(t, units, 1000, 99);
    writer.join();
  }
  testing::RawDataClient c(data_addr_);
  ASSERT_TRUE(c.connected());
  std::thread writer([&] { ASSERT_TRUE(c.Send(all)); });
  ExpectPutsThenUnits(c, units, 1000, 99);
  writer.join();

  // A 9 MiB PUT body (not a unit: refused, without closing the connection), in 64 KiB pieces.
  UnitPut junk{units[0].key, std::nullopt, std::string(9 << 20, 'j')};
  const std::string big = PutFrame(7, junk);
  std::thread pieces([&] {
    for (size_t at = 0; at < big.size(); at += 64 << 10) {
      ASSERT_TRUE(c.Send(std::string_view(big).substr(at, 64 << 10)));
      if ((at >> 16) % 8 == 0) std::this_thread::sleep_for(milliseconds(1));
    }
  });
  auto refused = c.Read(milliseconds(10000));
  pieces.join();
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->header.op, wire::Op::kError);
  EXPECT_EQ(refused->header.id, 7u);
  EXPECT_EQ(refused->header.flags, 0) << "a refused unit must not close the connection";
  EXPECT_EQ(wire::ParseError(refused->body).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(c.Send(wire::EncodeGet(8, Ns(), Key(units.back().key))));
  auto f = c.Read(milliseconds(5000));
  ASSERT_TRUE(f.has_value());
  auto u = wire::ParseUnit(f->body);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->bytes, units.back().bytes);
  EXPECT_EQ(data_metrics_.put_ok.Value(), static_cast<double>(2 * count));
}

// Full read chunks come from the data path's pool. A connection between requests holds none (its
// next read waits in a small chunk), and the pool unmaps them once idle, with no traffic to prompt
// it: after a burst, the cache's memory comes back down though its clients keep their connections.
TEST_F(DataPathTest, OpenConnectionsBetweenRequestsHoldNoFullChunk) {
  const size_t unit_bytes = testing::TestPromptUnits(ns_, testing::TestTokens(64, 12), 12)[0].bytes.size();
  const size_t count = (12 << 20) / unit_bytes + 1;  // ~3 chunks
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 * count, 12), 12);
  std::string all, keys;
  for (size_t i = 0; i < units.size(); ++i) {
    all += PutFrame(static_cast<uint32_t>(i), units[i]);
    keys += Key(units[i].key);
  }
  all += wire::EncodeGet(99, Ns(), keys);
  prometheus::Registry registry;
  DataPathMetrics m(registry);  // (the fixture's server sets its own gauge)
  DataServerOptions d;
  d.chunk_idle_release = milliseconds(1000);  // (long enough that the chunks are still mapped when a loaded machine checks)
  const auto server = std::move(DataServer::Start(d, store_.get(), &checks_, &m, TransportSecurity(), &store_io_)).value();
  testing::RawDataClient c("127.0.0.1:" + std::to_string(server->port()));
  ASSERT_TRUE(c.connected());
  for (int round = 0; round < 2; ++round) {
    std::thread writer([&] { ASSERT_TRUE(c.Send(all)); });
    ExpectPutsThenUnits(c, units, 0, 99);
    writer.join();
    EXPECT_GE(m.chunk_pool_bytes.Value(), static_cast<double>(4 << 20)) << "the full chunks did not come from the pool";
    for (int i = 0; i < 250 && m.held_bytes.Value() > 0; ++i) std::this_thread::sleep_for(milliseconds(20));
    EXPECT_EQ(m.held_bytes.Value(), 0) << "the open connection kept a full chunk, round " << round;
    for (int i = 0; i < 250 && m.chunk_pool_bytes.Value() > 0; ++i) std::this_thread::sleep_for(milliseconds(20));
    EXPECT_EQ(m.chunk_pool_bytes.Value(), 0) << "idle chunks stayed mapped, round " << round;
  }
}

// Random streams against what each frame must get: PUTs of units (acknowledged), PUTs of junk
// bodies from 1 byte to 6 MiB (refused, the connection kept), GETs of keys put earlier in the stream
// or never (units or misses), the bytes cut at random points with random pauses, under the normal
// budget and under one of a byte. Whatever the cuts, every frame gets its answer, in order.
TEST_F(DataPathTest, RandomlyCutStreamsGetEveryAnswerInOrder) {
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 * 120, 21), 21);
  const auto never = testing::TestPromptUnits(ns_, testing::TestTokens(64 * 4, 22), 22);  // not put
  const auto tight = StartDataServer(milliseconds(20000), 1);
  std::mt19937 rng(5);
  for (int round = 0; round < 6; ++round) {
    const std::string addr = "127.0.0.1:" + std::to_string((round % 2 == 0 ? data_ : tight)->port());
    struct Want {
      wire::Op op;
      std::vector<std::string> units;  // a GET's answers in order ("" = miss)
    };
    std::vector<Want> wants;
    std::string all;
    size_t next_unit = 0;
    std::vector<size_t> stored;  // units put so far in this stream
    for (int f = 0; f < 40; ++f) {
      const uint32_t id = static_cast<uint32_t>(f + 1);
      const int kind = static_cast<int>(rng() % 10);
      if (kind < 6 && next_unit < units.size()) {
        all += PutFrame(id, units[next_unit]);
        stored.push_back(next_unit++);
        wants.push_back({wire::Op::kPutOk, {}});
      } else if (kind < 8) {
        const size_t size = rng() % 4 == 0 ? (1 << 20) + rng() % (5 << 20) : 1 + rng() % 100000;
        all += PutFrame(id, UnitPut{never[0].key, std::nullopt, std::string(size, static_cast<char>('a' + f % 26))});
        wants.push_back({wire::Op::kError, {}});
      } else {
        std::string keys;
        Want w{wire::Op::kUnit, {}};
        for (size_t k = 0, n = 1 + rng() % 70; k < n; ++k) {
          const bool hit = !stored.empty() && rng() % 3 != 0;
          const UnitPut& u = hit ? units[stored[rng() % stored.size()]] : never[rng() % never.size()];
          keys += Key(u.key);
          w.units.push_back(hit ? u.bytes : "");
        }
        all += wire::EncodeGet(id, Ns(), keys);
        wants.push_back(std::move(w));
      }
    }
    testing::RawDataClient c(addr);
    ASSERT_TRUE(c.connected());
    std::thread writer([&] {
      for (size_t at = 0; at < all.size();) {
        const size_t n = std::min(all.size() - at, size_t{1} + rng() % (rng() % 2 ? 300 : 3 << 20));
        ASSERT_TRUE(c.Send(std::string_view(all).substr(at, n)));
        at += n;
        if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
      }
    });
    for (size_t f = 0; f < wants.size(); ++f) {
      const uint32_t id = static_cast<uint32_t>(f + 1);
      if (wants[f].op != wire::Op::kUnit) {
        auto a = c.Read(milliseconds(20000));
        ASSERT_TRUE(a.has_value()) << "round " << round << " frame " << f;
        EXPECT_EQ(a->header.id, id);
        EXPECT_EQ(a->header.op, wants[f].op) << "round " << round << " frame " << f;
        if (a->header.op == wire::Op::kError) {
          EXPECT_EQ(a->header.flags, 0);
          EXPECT_EQ(wire::ParseError(a->body).code(), StatusCode::kInvalidArgument);
        }
        continue;
      }
      for (size_t k = 0; k < wants[f].units.size(); ++k) {
        auto a = c.Read(milliseconds(20000));
        ASSERT_TRUE(a.has_value()) << "round " << round << " frame " << f << " key " << k;
        ASSERT_EQ(a->header.id, id);
        auto u = wire::ParseUnit(a->body);
        ASSERT_TRUE(u.ok());
        EXPECT_EQ(u->result, wants[f].units[k].empty() ? wire::UnitResult::kMiss : wire::UnitResult::kFound);
        EXPECT_EQ(u->bytes, wants[f].units[k]) << "round " << round << " frame " << f << " key " << k;
      }
    }
    writer.join();
  }
  EXPECT_EQ(data_metrics_.error_framing.Value(), 0);
  EXPECT_EQ(data_metrics_.error_io.Value(), 0);
  EXPECT_EQ(data_metrics_.error_timeout.Value(), 0);
}

TEST_F(DataPathTest, MalformedAndRandomBytesCloseOnlyTheirConnection) {
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 * 3, 3), 3);
  testing::RawDataClient bystander(data_addr_);  // open throughout, used at the end
  ASSERT_TRUE(bystander.connected());

  auto expect_fatal = [&](const std::string& bytes, const char* what) {
    testing::RawDataClient c(data_addr_);
    ASSERT_TRUE(c.connected());
    c.Send(bytes);
    auto f = c.Read(milliseconds(5000));
    ASSERT_TRUE(f.has_value()) << what;
    EXPECT_EQ(f->header.op, wire::Op::kError) << what;
    EXPECT_EQ(f->header.flags, wire::kFlagFatal) << what;
    EXPECT_TRUE(c.ClosedByPeer(milliseconds(5000))) << what;
  };
  std::string bad_magic = PutFrame(1, units[0]);
  bad_magic[0] = 'X';
  expect_fatal(bad_magic, "bad magic");
  std::string bad_version = PutFrame(1, units[0]);
  bad_version[4] = 9;
  expect_fatal(bad_version, "bad version");
  expect_fatal(wire::EncodeHeader(wire::Op::kPut, 1, 0xFFFFFFFFu), "4 GiB body");
  expect_fatal(wire::EncodeHeader(wire::Op::kPutOk, 1, 0), "a response opcode");
  expect_fatal(wire::EncodeHeader(wire::Op::kPut, 1, 10) + std::string(10, 'x'), "PUT body too short");
  std::string miscounted = wire::EncodeGet(1, Ns(), std::string(64, 'k'));
  miscounted[wire::kHeaderBytes + wire::kNamespaceBytes] = 5;  // says 5 keys, carries 2
  expect_fatal(miscounted, "GET count mismatch");

  // Frames cut short, then the client goes away mid-frame.
  for (size_t cut : {size_t{3}, wire::kHeaderBytes, wire::kHeaderBytes + 50, PutFrame(1, units[0]).size() - 1}) {
    testing::RawDataClient c(data_addr_);
    ASSERT_TRUE(c.connected());
    c.Send(PutFrame(1, units[0]).substr(0, cut));
  }
  // Random bytes, and random bytes behind a valid header.
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    testing::RawDataClient c(data_addr_);
    ASSERT_TRUE(c.connected());
    std::string junk(rng() % 4096, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    if (i % 2 == 1) junk = wire::EncodeHeader(i % 4 == 1 ? wire::Op::kPut : wire::Op::kGet, 1, junk.size()) + junk;
    c.Send(junk);
    if (i % 10 == 0) c.ClosedByPeer(milliseconds(3000));
  }
  EXPECT_GE(data_metrics_.error_framing.Value(), 6);
  EXPECT_GE(data_metrics_.error_io.Value(), 3);

  ExpectServesACorrectClient(data_addr_, units[1]);
  ASSERT_TRUE(bystander.Send(PutFrame(5, units[2])));
  auto f = bystander.Read(milliseconds(5000));
  ASSERT_TRUE(f.has_value()) << "a connection unrelated to the garbage was hurt";
  EXPECT_EQ(f->header.op, wire::Op::kPutOk);
  auto got = client_->Get(ns_, {{units[1].key, std::nullopt}, {units[2].key, std::nullopt}});
  EXPECT_EQ(got[0], units[1].bytes);
  EXPECT_EQ(got[1], units[2].bytes);
}

// A memory budget of one byte: every connection still gets every answer (frames wait their turn
// instead of failing), and once they are written and the connections closed nothing is held.
TEST_F(DataPathTest, AnExhaustedMemoryBudgetSlowsConnectionsButServesThemAll) {
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 * 8, 6), 6);
  const auto tight = StartDataServer(milliseconds(20000), 1);
  const std::string addr = "127.0.0.1:" + std::to_string(tight->port());
  std::vector<std::thread> peers;
  for (int p = 0; p < 3; ++p)
    peers.emplace_back([&, p] {
      testing::RawDataClient c(addr);
      ASSERT_TRUE(c.connected());
      std::string all, keys;
      for (size_t i = 0; i < units.size(); ++i) {
        all += PutFrame(static_cast<uint32_t>(100 * p + i), units[i]);
        keys += Key(units[i].key);
      }
      all += wire::EncodeGet(99, Ns(), keys);
      ASSERT_TRUE(c.Send(all));
      for (size_t i = 0; i < units.size(); ++i) {
        auto f = c.Read(milliseconds(10000));
        ASSERT_TRUE(f.has_value()) << p << " " << i;
        EXPECT_EQ(f->header.op, wire::Op::kPutOk) << wire::ParseError(f->body).ToString();
      }
      for (size_t i = 0; i < units.size(); ++i) {
        auto f = c.Read(milliseconds(10000));
        ASSERT_TRUE(f.has_value()) << p << " " << i;
        auto u = wire::ParseUnit(f->body);
        ASSERT_TRUE(u.ok());
        EXPECT_EQ(u->bytes, units[i].bytes) << p << " " << i;
      }
    });
  for (auto& t : peers) t.join();
  // (The server notices the closes asynchronously.)
  for (int i = 0; i < 100 && data_metrics_.connections_open.Value() > 0; ++i) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(data_metrics_.connections_open.Value(), 0);
  EXPECT_EQ(data_metrics_.held_bytes.Value(), 0) << "budget bytes leaked";
}

TEST_F(DataPathTest, ConnectionsPastTheLimitAreRefusedUntilOneCloses) {
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64, 7), 7);
  const auto limited = StartDataServer(milliseconds(20000), int64_t{512} << 20, 2);
  const std::string addr = "127.0.0.1:" + std::to_string(limited->port());
  auto first = std::make_unique<testing::RawDataClient>(addr);
  testing::RawDataClient second(addr);
  for (auto* c : {first.get(), &second}) {  // both admitted: each is answered
    ASSERT_TRUE(c->Send(wire::EncodeGet(1, Ns(), Key(units[0].key))));
    ASSERT_TRUE(c->Read(milliseconds(5000)).has_value());
  }
  {
    testing::RawDataClient third(addr);
    EXPECT_TRUE(third.ClosedByPeer(milliseconds(5000)));
  }
  EXPECT_EQ(data_metrics_.connections_refused.Value(), 1);
  first.reset();
  for (int i = 0; i < 100 && data_metrics_.connections_open.Value() > 1; ++i) std::this_thread::sleep_for(milliseconds(20));
  ExpectServesACorrectClient(addr, units[0]);  // room again
  EXPECT_EQ(data_metrics_.connections_refused.Value(), 1);
}

TEST_F(DataPathTest, IdleAndStalledConnectionsTimeOut) {
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64, 4), 4);
  const auto quick = StartDataServer(milliseconds(400));
  const std::string addr = "127.0.0.1:" + std::to_string(quick->port());
  {  // Says nothing: told why, then closed.
    testing::RawDataClient c(addr);
    auto f = c.Read(milliseconds(5000));
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->header.op, wire::Op::kError);
    EXPECT_EQ(wire::ParseError(f->body).code(), StatusCode::kDeadlineExceeded);
    EXPECT_TRUE(c.ClosedByPeer(milliseconds(5000)));
  }
  {  // Stops half way through a frame.
    testing::RawDataClient c(addr);
    c.Send(PutFrame(1, units[0]).substr(0, 100));
    EXPECT_TRUE(c.ClosedByPeer(milliseconds(5000)));
  }
  {  // Never reads its answers: closed all the same (by the write timeout, or by the idle timeout
     // when the answers fit the socket buffers).
    testing::RawDataClient c(addr);
    ASSERT_TRUE(c.Send(PutFrame(1, units[0])));
    std::string many;
    for (int i = 0; i < 40; ++i) many += wire::EncodeGet(2 + i, Ns(), std::string(Key(units[0].key)) + Key(units[0].key));
    c.Send(many);
    std::this_thread::sleep_for(milliseconds(2000));
    EXPECT_TRUE(c.ClosedByPeer(milliseconds(5000)));
  }
  EXPECT_GE(data_metrics_.error_timeout.Value(), 2);
  ExpectServesACorrectClient(addr, units[0]);
}

// A pooled connection that the server closed for idleness is replaced, not used and failed over.
TEST_F(DataPathTest, PooledConnectionsClosedByTheServerAreReplaced) {
  const auto quick = StartDataServer(milliseconds(300));
  CacheServiceOptions co{kFp};
  co.data_port = quick->port();
  CacheService service(store_.get(), &metrics_, co, &store_io_);
  RpcServer rpc = std::move(StartRpcServer({}, {&service})).value();
  auto client = std::move(CacheClient::Create({{"127.0.0.1:" + std::to_string(rpc.port)}})).value();
  const auto units = testing::TestPromptUnits(ns_, testing::TestTokens(64 * 4, 10), 10);
  ASSERT_EQ(client->Put(ns_, units).acked, static_cast<int>(units.size()));
  EXPECT_EQ(data_metrics_.connections_accepted.Value(), 1);
  std::this_thread::sleep_for(milliseconds(1000));  // the server times the pooled connection out
  EXPECT_EQ(data_metrics_.connections_open.Value(), 0);
  std::vector<UnitGet> want;
  for (const auto& u : units) want.push_back({u.key, u.parent});
  auto got = client->Get(ns_, want);
  for (size_t i = 0; i < units.size(); ++i) EXPECT_EQ(got[i], units[i].bytes) << i;
  EXPECT_EQ(data_metrics_.connections_accepted.Value(), 2);
  EXPECT_EQ(data_metrics_.get_ok.Value(), 1) << "the Get did not use the data path";
  rpc.server->Shutdown();
}

TEST_F(DataPathTest, FallsBackToGrpcWhenTheDataPathGoesAway) {
  const auto prompt = testing::TestTokens(64 * 8, 5);
  const auto units = testing::TestPromptUnits(ns_, prompt, 5);
  ASSERT_EQ(client_->Put(ns_, units).acked, static_cast<int>(units.size()));
  ASSERT_EQ(data_metrics_.put_ok.Value(), static_cast<double>(units.size()));
  data_.reset();  // pooled connections break; the advertised port no longer answers
  std::vector<UnitGet> want;
  for (const auto& u : units) want.push_back({u.key, u.parent});
  auto got = client_->Get(ns_, want);
  for (size_t i = 0; i < units.size(); ++i) EXPECT_EQ(got[i], units[i].bytes) << i;
  const auto more = testing::TestPromptUnits(ns_, testing::TestTokens(64 * 2, 6), 6);
  const PutResult pr = client_->Put(ns_, more);
  EXPECT_EQ(pr.acked, static_cast<int>(more.size()));
  EXPECT_TRUE(pr.first_error.ok()) << pr.first_error.ToString();
  EXPECT_EQ(data_metrics_.put_ok.Value(), static_cast<double>(units.size())) << "went over the data path";
  EXPECT_EQ(store_->stats().units, units.size() + more.size());
}

}  // namespace
}  // namespace ds41
