// Test helper: a scripted HTTP server on a loopback port, for the client tests (header-only).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

namespace ds41::testing {

// Accepts connections one after another; `serve(fd)` handles each (reading requests itself).
class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<void(int fd)> serve) : serve_(std::move(serve)) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listen_, 8), 0);
    socklen_t len = sizeof(a);
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int fd = ::accept(listen_, nullptr, nullptr);
        if (fd < 0) return;
        ++accepted_;
        serve_(fd);
        ::close(fd);
      }
    });
  }
  ~ScriptedServer() {
    ::shutdown(listen_, SHUT_RDWR);
    ::close(listen_);
    thread_.join();
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  std::function<void(int)> serve_;
  int listen_ = -1, port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// Reads one request (headers and a Content-Length body); false when the client closed.
inline bool ReadRequest(int fd, std::string* head = nullptr) {
  std::string buf;
  char c[4096];
  size_t end;
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = ::recv(fd, c, sizeof(c), 0);
    if (n <= 0) return false;
    buf.append(c, static_cast<size_t>(n));
  }
  size_t length = 0;
  if (size_t p = buf.find("Content-Length: "); p != std::string::npos) length = std::stoul(buf.substr(p + 16));
  while (buf.size() < end + 4 + length) {
    const ssize_t n = ::recv(fd, c, sizeof(c), 0);
    if (n <= 0) return false;
    buf.append(c, static_cast<size_t>(n));
  }
  if (head != nullptr) *head = buf.substr(0, end);
  return true;
}

inline void Write(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }

inline std::string Chunk(const std::string& s) {
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", s.size());
  return std::string(size) + "\r\n" + s + "\r\n";
}

}  // namespace ds41::testing
