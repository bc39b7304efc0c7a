// DataChannel against a scripted server (POSIX sockets): answers cut at arbitrary bytes, many in one
// read, and bytes the protocol does not allow. The real server's side is tests/cache.
#include "cache_client/data_channel.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace ds41 {
namespace {

using std::chrono::milliseconds;

// Accepts one connection, reads whatever the client sends until `request_bytes` arrived, then
// writes `answer` in pieces of the given sizes (cycled), pausing between them so that they mostly
// arrive as separate reads.
class ScriptedServer {
 public:
  ScriptedServer() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listen_fd_, 1), 0);
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~ScriptedServer() {
    if (thread_.joinable()) thread_.join();
    close(listen_fd_);
  }
  int port() const { return port_; }

  void Serve(size_t request_bytes, std::string answer, std::vector<size_t> pieces) {
    thread_ = std::thread([this, request_bytes, answer = std::move(answer), pieces = std::move(pieces)] {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      ASSERT_GE(fd, 0);
      std::string got(request_bytes, '\0');
      for (size_t have = 0; have < request_bytes;) {
        const ssize_t n = recv(fd, got.data() + have, request_bytes - have, 0);
        if (n <= 0) break;
        have += static_cast<size_t>(n);
      }
      size_t at = 0;
      for (size_t i = 0; at < answer.size(); ++i) {
        const size_t n = std::min(pieces[i % pieces.size()], answer.size() - at);
        if (send(fd, answer.data() + at, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) break;
        at += n;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, 2000);  // until the client is done with the connection
      close(fd);
    });
  }

 private:
  int listen_fd_ = -1, port_ = 0;
  std::thread thread_;
};

const std::string kNsId(32, 'n'), kFp(64, 'f');
wire::NamespaceView Ns() { return {kNsId, kFp, 1}; }
DataChannel::Deadline Soon() { return std::chrono::steady_clock::now() + milliseconds(5000); }

std::unique_ptr<DataChannel> Connect(const ScriptedServer& s) {
  auto c = DataChannel::Connect("127.0.0.1", s.port(), nullptr, TransportSecurity(), Soon());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

std::string Key(int i) { return std::string(31, 'k') + static_cast<char>('a' + i); }

// GET answers of `n` keys: even ones found (100 + step * i bytes: with step 3000, past the
// read-ahead), odd ones missing; returns the frames and fills `units`.
std::string UnitAnswers(uint32_t id, int n, size_t step, std::vector<std::string>* units) {
  std::string all;
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      units->push_back(std::string(100 + step * i, static_cast<char>('A' + i)));
      all += wire::EncodeUnitPrefix(id, Key(i), wire::UnitResult::kFound, units->back().size()) + units->back();
    } else {
      units->push_back("");
      all += wire::EncodeUnitPrefix(id, Key(i), wire::UnitResult::kMiss, 0);
    }
  }
  return all;
}

size_t GetRequestBytes(int keys) { return wire::EncodeGet(1, Ns(), std::string(32 * keys, 'k')).size(); }

TEST(DataChannelTest, AnswersCutAtAnyByteOrManyInOneReadAllArrive) {
  const int kKeys = 9;
  for (const std::vector<size_t>& pieces : std::vector<std::vector<size_t>>{{1}, {7, 15, 16, 17, 33}, {5000}, {1 << 20}}) {
    ScriptedServer server;
    std::vector<std::string> want;
    // (Byte by byte only over short units: each piece is its own send, 50 us apart.)
    server.Serve(GetRequestBytes(kKeys), UnitAnswers(1, kKeys, pieces[0] == 1 ? 200 : 3000, &want), pieces);
    auto c = Connect(server);
    ASSERT_NE(c, nullptr);
    std::vector<std::string> keys;
    for (int i = 0; i < kKeys; ++i) keys.push_back(Key(i));
    std::vector<std::string_view> views(keys.begin(), keys.end());
    std::vector<std::optional<std::string>> units;
    size_t answered = 0;
    ASSERT_TRUE(c->Get(Ns(), views, Soon(), &units, &answered).ok()) << pieces[0];
    EXPECT_EQ(answered, static_cast<size_t>(kKeys));
    for (int i = 0; i < kKeys; ++i) {
      if (i % 2 == 0) {
        ASSERT_TRUE(units[i].has_value()) << i;
        EXPECT_EQ(*units[i], want[i]) << i;
      } else {
        EXPECT_FALSE(units[i].has_value()) << i;
      }
    }
    EXPECT_FALSE(c->broken());
  }
}

TEST(DataChannelTest, HundredsOfPutAnswersInOneWrite) {
  const int kUnits = 300;
  std::string answers, requests;
  std::vector<DataChannel::PutUnit> puts;
  std::vector<std::string> keys;
  for (int i = 0; i < kUnits; ++i) keys.push_back(std::string(32, static_cast<char>(i)));
  for (int i = 0; i < kUnits; ++i) {
    puts.push_back({keys[i], "", "unit"});
    requests += wire::EncodePutPrefix(1 + i, Ns(), keys[i], "", 4) + "unit";
    answers += i == 150 ? wire::EncodeError(1 + i, InvalidArgumentError("refused"), false) : wire::EncodePutOk(1 + i);
  }
  ScriptedServer server;
  server.Serve(requests.size(), answers, {answers.size()});
  auto c = Connect(server);
  ASSERT_NE(c, nullptr);
  std::vector<std::optional<Status>> st;
  ASSERT_TRUE(c->Put(Ns(), puts, Soon(), &st).ok());
  for (int i = 0; i < kUnits; ++i) {
    ASSERT_TRUE(st[i].has_value()) << i;
    EXPECT_EQ(st[i]->ok(), i != 150) << i;
  }
  EXPECT_EQ(st[150]->code(), StatusCode::kInvalidArgument);
}

TEST(DataChannelTest, BytesPastTheLastAnswerBreakTheChannel) {
  ScriptedServer server;
  const std::string request = wire::EncodePutPrefix(1, Ns(), Key(0), "", 4) + "unit";
  server.Serve(request.size(), wire::EncodePutOk(1) + wire::EncodePutOk(2), {1 << 20});
  auto c = Connect(server);
  ASSERT_NE(c, nullptr);
  std::vector<std::optional<Status>> st;
  const std::string key = Key(0);
  const Status s = c->Put(Ns(), {{key, "", "unit"}}, Soon(), &st);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("after the last answer"), std::string::npos) << s.ToString();
  EXPECT_TRUE(c->broken());
}

// The same when the extra bytes come in the system call that reads the rest of a large unit.
TEST(DataChannelTest, BytesPastALargeLastUnitBreakTheChannel) {
  ScriptedServer server;
  const std::string unit(60000, 'u');
  server.Serve(GetRequestBytes(1),
               wire::EncodeUnitPrefix(1, Key(0), wire::UnitResult::kFound, unit.size()) + unit + wire::EncodePutOk(2),
               {1 << 20});
  auto c = Connect(server);
  ASSERT_NE(c, nullptr);
  const std::string key = Key(0);
  std::vector<std::optional<std::string>> units;
  size_t answered = 0;
  const Status s = c->Get(Ns(), {key}, Soon(), &units, &answered);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("after the last answer"), std::string::npos) << s.ToString();
  EXPECT_TRUE(c->broken());
}

TEST(DataChannelTest, AFatalErrorAndAMalformedHeaderBreakTheChannel) {
  std::string garbage(wire::kHeaderBytes, 'x');
  for (const std::string& answer : {wire::EncodeError(1, InvalidArgumentError("bad frame"), true), garbage}) {
    ScriptedServer server;
    const std::string request = wire::EncodePutPrefix(1, Ns(), Key(0), "", 4) + "unit";
    server.Serve(request.size(), answer, {3});
    auto c = Connect(server);
    ASSERT_NE(c, nullptr);
    std::vector<std::optional<Status>> st;
    const std::string key = Key(0);
    EXPECT_FALSE(c->Put(Ns(), {{key, "", "unit"}}, Soon(), &st).ok());
    EXPECT_TRUE(c->broken());
    EXPECT_FALSE(st[0].has_value());
  }
}

}  // namespace
}  // namespace ds41
