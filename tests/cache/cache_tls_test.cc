// cache_service (the real binary) with TLS flags: a client with the cluster's certificate reads and
// writes; plaintext, an untrusted certificate, no client certificate or a wrong server name are
// refused; unreadable TLS files stop the binary with a clear error.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "cache.grpc.pb.h"
#include "cache_client/cache_client.h"
#include "cache_client/data_channel.h"
#include "rpc/transport_security.h"
#include "tests/cache/raw_data_client.h"
#include "tests/cache/test_units.h"
#include "tests/support/child_process.h"
#include "tests/support/test_checkpoint.h"
#include "tests/support/test_pki.h"
#include "unit/unit_key.h"

namespace ds41 {
namespace {

namespace pb = ds41::cache::v1;
const std::string kFp(64, 'c');

grpc::StatusCode StatsCode(const std::string& addr, const std::shared_ptr<grpc::ChannelCredentials>& creds,
                           const std::string& server_name) {
  grpc::ChannelArguments args;
  if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  auto stub = pb::Cache::NewStub(grpc::CreateCustomChannel(addr, creds, args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  pb::StatsResponse st;
  return stub->Stats(&ctx, pb::StatsRequest(), &st).error_code();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), {}};
}

// cache_service with the test PKI's server certificate, mutual TLS on.
std::vector<std::string> TlsServerArgs(const testing::TestPki& pki, const std::string& dir) {
  return {testing::BinaryDir() + "/cache_service/cache_service", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
          "--path", testing::TempDir(dir), "--model-fingerprint", kFp, "--tls-cert", pki.cert, "--tls-key", pki.key,
          "--tls-ca", pki.ca};
}

TransportSecurity Load(const TlsOptions& o) {
  auto s = TransportSecurity::Load(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : TransportSecurity();
}

TEST(TransportSecurityTest, LoadRefusesIncompleteOrUnreadableMaterial) {
  const testing::TestPki pki = testing::MakeTestPki();
  ASSERT_FALSE(pki.dir.empty()) << "openssl failed";
  EXPECT_FALSE(TransportSecurity::Load({}).value().tls());
  EXPECT_FALSE(TransportSecurity::Load({"", pki.key, "", true, ""}).ok());           // key without cert
  EXPECT_FALSE(TransportSecurity::Load({pki.cert, "", pki.ca, true, ""}).ok());      // cert without key
  EXPECT_FALSE(TransportSecurity::Load({pki.cert, pki.key, "", true, ""}).ok());     // no CA
  EXPECT_FALSE(TransportSecurity::Load({pki.cert, pki.key, "/nonexistent", true, ""}).ok());
  const std::string not_pem = testing::TempDir("notpem") + "/x.pem";
  std::ofstream(not_pem) << "hello";
  auto bad = TransportSecurity::Load({pki.cert, pki.key, not_pem, true, ""});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--tls-ca"), std::string::npos) << bad.status().message();
  EXPECT_TRUE(TransportSecurity::Load({pki.cert, pki.key, pki.ca, true, ""}).value().tls());
}

TEST(CacheTlsTest, OnlyPeersWithTheClustersCertificateGetIn) {
  const testing::TestPki pki = testing::MakeTestPki();
  ASSERT_FALSE(pki.dir.empty()) << "openssl failed";
  testing::ChildProcess server(TlsServerArgs(pki, "tlscache"), "cache_service ready");
  ASSERT_TRUE(server.ready());
  const std::string addr = server.fields()["grpc"];
  const std::string name = testing::TestPki::kServerName;
  const TransportSecurity good = Load({pki.cert, pki.key, pki.ca, true, name});
  EXPECT_EQ(StatsCode(addr, good.ChannelCredentials(), name), grpc::StatusCode::OK);
  EXPECT_NE(StatsCode(addr, grpc::InsecureChannelCredentials(), ""), grpc::StatusCode::OK);
  // The dialled host (127.0.0.1) is not in the certificate: refused without the name override.
  EXPECT_NE(StatsCode(addr, good.ChannelCredentials(), ""), grpc::StatusCode::OK);
  // A certificate from another CA, and no client certificate at all (mutual TLS is on).
  const TransportSecurity rogue = Load({pki.rogue_cert, pki.rogue_key, pki.ca, true, name});
  EXPECT_NE(StatsCode(addr, rogue.ChannelCredentials(), name), grpc::StatusCode::OK);
  grpc::SslCredentialsOptions anonymous;
  anonymous.pem_root_certs = ReadFile(pki.ca);
  EXPECT_NE(StatsCode(addr, grpc::SslCredentials(anonymous), name), grpc::StatusCode::OK);

  // The shared client library, with the process's security installed as the mains do.
  SetProcessTransportSecurity(good);
  auto client = std::move(CacheClient::Create({{addr}})).value();
  const CacheNamespace ns = CacheNamespace::Make(kFp, "t");
  const std::vector<int32_t> tokens(64, 7);
  PrefixHit h = client->LookupPrefix(ns, tokens, 64);
  EXPECT_EQ(h.shards_down, 0);
  EXPECT_EQ(h.tokens, 0);
  SetProcessTransportSecurity(TransportSecurity());
  auto plain = std::move(CacheClient::Create({{addr}})).value();
  EXPECT_EQ(plain->LookupPrefix(ns, tokens, 64).shards_down, 1);  // a miss, never an error
}

// The bulk data path of a TLS server is TLS too, with the same certificates and mutual auth.
TEST(CacheTlsTest, TheDataPathIsTlsWithTheSameCertificates) {
  const testing::TestPki pki = testing::MakeTestPki();
  ASSERT_FALSE(pki.dir.empty()) << "openssl failed";
  testing::ChildProcess server(TlsServerArgs(pki, "tlsdata"), "cache_service ready");
  ASSERT_TRUE(server.ready());
  EXPECT_EQ(server.fields()["data_tls"], "on");
  const std::string name = testing::TestPki::kServerName;
  const TransportSecurity good = Load({pki.cert, pki.key, pki.ca, true, name});
  SetProcessTransportSecurity(good);
  auto client = std::move(CacheClient::Create({{server.fields()["grpc"]}})).value();
  SetProcessTransportSecurity(TransportSecurity());
  const CacheNamespace ns = CacheNamespace::Make(kFp, "t");
  const auto units = testing::TestPromptUnits(ns, testing::TestTokens(64 * 6 + 5, 3), 3);
  const PutResult pr = client->Put(ns, units);
  EXPECT_EQ(pr.acked, static_cast<int>(units.size())) << pr.first_error.ToString();
  std::vector<UnitGet> want;
  for (const auto& u : units) want.push_back({u.key, u.parent});
  auto got = client->Get(ns, want);
  for (size_t i = 0; i < units.size(); ++i) EXPECT_EQ(got[i], units[i].bytes) << i;
  const std::string metrics = testing::HttpGet(server.fields()["metrics"], "/metrics");
  EXPECT_NE(metrics.find("ds41_cache_data_frames_total{opcode=\"put\",result=\"ok\"} 7"), std::string::npos)
      << "the units did not travel over the (TLS) data path";

  const std::string data = server.fields()["data"];
  {  // Plaintext frames get nothing back.
    testing::RawDataClient raw(data);
    ASSERT_TRUE(raw.connected());
    raw.Send(wire::EncodeGet(1, {std::string(32, 'n'), kFp, kUnitFormatVersion}, std::string(32, 'k')));
    EXPECT_FALSE(raw.Read(std::chrono::milliseconds(3000)).has_value());
  }
  // Refused at the handshake or at the first exchange, whichever side's check it is.
  const auto answers = [&](const std::shared_ptr<asio::ssl::context>& ctx, const TransportSecurity& security) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    auto ch = DataChannel::Connect("127.0.0.1", std::stoi(data.substr(data.rfind(':') + 1)), ctx, security, deadline);
    std::vector<std::optional<std::string>> out;
    size_t answered = 0;
    const std::string key(32, 'k');
    return ch.ok() && (*ch)->Get({std::string_view(key), kFp, kUnitFormatVersion}, {key}, deadline, &out, &answered).ok();
  };
  EXPECT_TRUE(answers(*MakeClientTlsContext(good), good));  // the control: the cluster's certificate and name
  // A certificate from another CA.
  const TransportSecurity rogue = Load({pki.rogue_cert, pki.rogue_key, pki.ca, true, name});
  EXPECT_FALSE(answers(*MakeClientTlsContext(rogue), rogue));
  // No client certificate at all (mutual TLS is on): a client context that trusts the CA and shows nothing.
  auto anonymous = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  anonymous->add_certificate_authority(asio::buffer(good.ca_pem()));
  anonymous->set_verify_mode(asio::ssl::verify_peer);
  EXPECT_FALSE(answers(anonymous, good));
  // The server's certificate does not name the host dialled (127.0.0.1): the client refuses it.
  const TransportSecurity unnamed = Load({pki.cert, pki.key, pki.ca, true, ""});
  EXPECT_FALSE(answers(*MakeClientTlsContext(unnamed), unnamed));

  // The refusals were the server's choice, not a dead server: it still serves the cluster's peers,
  // and it counted the plaintext peer as a TLS failure.
  auto again = client->Get(ns, want);
  for (size_t i = 0; i < units.size(); ++i) EXPECT_EQ(again[i], units[i].bytes) << i;
  const std::string after = testing::HttpGet(server.fields()["metrics"], "/metrics");
  EXPECT_NE(after.find("ds41_cache_data_frames_total{opcode=\"get\",result=\"ok\"} 3"), std::string::npos) << after;
  const std::string tls_errors = "ds41_cache_data_protocol_errors_total{reason=\"tls\"} ";
  const size_t at = after.find(tls_errors);
  ASSERT_NE(at, std::string::npos) << after;
  EXPECT_GE(std::stod(after.substr(at + tls_errors.size())), 1.0) << "no TLS refusal was counted";
}

TEST(CacheTlsTest, UnreadableTlsFilesStopTheBinaryWithExit2) {
  const std::string cmd = testing::BinaryDir() + "/cache_service/cache_service --listen 127.0.0.1:0 --path " +
                          testing::TempDir("tlsbad") + " --tls-cert /nonexistent.pem --tls-key /x --tls-ca /y 2>/dev/null";
  const int st = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

}  // namespace
}  // namespace ds41
