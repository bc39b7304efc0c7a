#include "tests/cache/raw_data_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>

namespace ds41::testing {

RawDataClient::RawDataClient(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host_port.substr(0, colon).c_str(), host_port.substr(colon + 1).c_str(), &hints, &res) != 0) return;
  fd_ = socket(res->ai_family, SOCK_STREAM, 0);
  if (fd_ >= 0 && connect(fd_, res->ai_addr, res->ai_addrlen) != 0) {
    close(fd_);
    fd_ = -1;
  }
  freeaddrinfo(res);
}

RawDataClient::~RawDataClient() {
  if (fd_ >= 0) close(fd_);
}

bool RawDataClient::Send(std::string_view b) {
  while (fd_ >= 0 && !b.empty()) {
    const ssize_t n = send(fd_, b.data(), b.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    b.remove_prefix(static_cast<size_t>(n));
  }
  return fd_ >= 0;
}

void RawDataClient::HalfClose() {
  if (fd_ >= 0) shutdown(fd_, SHUT_WR);
}

bool RawDataClient::ReadExactly(char* out, size_t n, std::chrono::steady_clock::time_point deadline) {
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t got = recv(fd_, out, n, 0);
    if (got <= 0) {
      eof_ = true;
      return false;
    }
    out += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

std::optional<RawFrame> RawDataClient::Read(std::chrono::milliseconds timeout) {
  if (fd_ < 0 || eof_) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::array<uint8_t, wire::kHeaderBytes> head{};
  if (!ReadExactly(reinterpret_cast<char*>(head.data()), head.size(), deadline)) return std::nullopt;
  auto h = wire::ParseHeader(head, /*requests=*/false, 0);
  if (!h.ok()) return std::nullopt;
  RawFrame f{*h, std::string(h->body_length, '\0')};
  if (!ReadExactly(f.body.data(), f.body.size(), deadline)) return std::nullopt;
  return f;
}

bool RawDataClient::ClosedByPeer(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (fd_ >= 0 && !eof_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd_, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    if (recv(fd_, buf, sizeof(buf), 0) <= 0) eof_ = true;
  }
  return eof_;
}

}  // namespace ds41::testing
