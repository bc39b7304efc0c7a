#include "bench/loopback_pipe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

#include "bench/cpu_time.h"
#include "util/io_buffer.h"

namespace ds41 {
namespace {

constexpr size_t kBlock = 4 << 20;    // the store's segment batch and the disk test's block
constexpr size_t kAlign = 4096;       // O_DIRECT's length granularity
constexpr size_t kUnitsPerWrite = 64;  // units per writev of a client
// A read of a block's part starts at the 4 KiB boundary below it, so a buffer holds a block and two more.
constexpr size_t kBufferBytes = kBlock + 2 * kAlign;

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
};

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

// A send or receive that makes no progress for this long fails the run (a stall, not a slow disk).
constexpr int kStallSeconds = 10;

// Sets the socket's options on both ends: no Nagle delay, and the stall timeout.
Fd Configured(Fd s) {
  if (s.fd < 0) return s;
  int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const timeval stall{kStallSeconds, 0};
  ::setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &stall, sizeof(stall));
  ::setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof(stall));
  return s;
}

Fd Connect(uint16_t port) {
  Fd s(::socket(AF_INET, SOCK_STREAM, 0));
  const sockaddr_in a = Loopback(port);
  if (s.fd < 0 || ::connect(s.fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) return Fd();
  return Configured(std::move(s));
}

// Sends all of v[0..n) (which it advances); false on an error.
bool WriteAll(int fd, iovec* v, int n) {
  while (n > 0) {
    ssize_t k = ::writev(fd, v, std::min(n, IOV_MAX));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    for (auto left = static_cast<size_t>(k); left > 0;) {
      const size_t step = std::min(left, v->iov_len);
      v->iov_base = static_cast<char*>(v->iov_base) + step;
      v->iov_len -= step;
      left -= step;
      if (v->iov_len == 0) ++v, --n;
    }
    while (n > 0 && v->iov_len == 0) ++v, --n;
  }
  return true;
}

bool SendAll(int fd, const uint8_t* p, size_t n) {
  iovec v{const_cast<uint8_t*>(p), n};
  return WriteAll(fd, &v, 1);
}

// Receives exactly n bytes; false on an error or an early end.
bool RecvAll(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Runs fn(t) on `n` threads at once; true if every call returned true. A call that fails runs
// failed(t) (which shuts its connection, so that the thread at its other end stops waiting).
template <typename F, typename G>
bool OnThreads(int n, F fn, G failed) {
  std::atomic<bool> ok{true};
  std::vector<std::thread> th;
  for (int t = 0; t < n; ++t)
    th.emplace_back([&, t] {
      if (fn(t)) return;
      ok = false;
      failed(t);
    });
  for (auto& t : th) t.join();
  return ok;
}

// A buffer's filled part, handed from the thread that filled it to the one that drains it.
struct Piece {
  const uint8_t* data = nullptr;  // null: the handoff was closed
  size_t bytes = 0;
  bool last = false;  // the last of a call's bytes
};

// Two I/O buffers passed between a thread that fills them and one that drains them, so that
// filling one overlaps draining the other (as the store's staging buffers and writer do).
class Handoff {
 public:
  Handoff() {
    for (auto& b : buffers_) {
      b = AllocateIoBuffer(kBufferBytes);
      std::memset(b.get(), 0, kBufferBytes);  // (first touch outside the timed runs)
    }
  }
  // An empty buffer of kBufferBytes to fill, or null once closed.
  uint8_t* Fill() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return closed_ || full_ - drained_ < 2; });
    return closed_ ? nullptr : buffers_[full_ % 2].get();
  }
  void Filled(Piece p) {
    std::lock_guard l(mu_);
    pieces_[full_++ % 2] = p;
    cv_.notify_all();
  }
  // The next piece; empty once closed.
  Piece Drain() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return closed_ || full_ > drained_; });
    return closed_ ? Piece{} : pieces_[drained_ % 2];
  }
  void Drained() {
    std::lock_guard l(mu_);
    ++drained_;
    cv_.notify_all();
  }
  void Close() {
    std::lock_guard l(mu_);
    closed_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  IoBuffer buffers_[2];
  Piece pieces_[2];
  uint64_t full_ = 0, drained_ = 0;
  bool closed_ = false;
};

// Where a connection's bytes went: its stream's [from, from + bytes) at file offset `at`.
struct Block {
  uint64_t from, at;
  size_t bytes;
};

size_t Padded(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

PipeThroughput MeasureLoopbackPipe(const std::string& dir, const PipeRun& run, const std::vector<std::string_view>& units) {
  PipeThroughput r;
  const int clients = run.clients, units_per_client = run.units_per_client;
  const int put_call_units = run.put_call_units, get_call_units = run.get_call_units;
  if (clients <= 0 || units_per_client <= 0 || put_call_units <= 0 || get_call_units <= 0 || units.empty()) return r;
  const std::string path = dir + "/loopback-pipe.tmp";
  Fd file(::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_DIRECT, 0644));
  Fd listener(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof(a);
  if (file.fd < 0 || listener.fd < 0 || ::bind(listener.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(listener.fd, clients) != 0 || ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::unlink(path.c_str());
    return r;
  }
  // Both ends of every connection, made before the clock starts.
  std::vector<Fd> client_end, server_end;
  for (int c = 0; c < clients; ++c) {
    Fd client = Connect(ntohs(a.sin_port));
    Fd server = client.fd >= 0 ? Configured(Fd(::accept(listener.fd, nullptr, nullptr))) : Fd();
    if (server.fd < 0) {
      ::unlink(path.c_str());
      return r;
    }
    client_end.push_back(std::move(client));
    server_end.push_back(std::move(server));
  }
  // Client c's stream: units[(c + i) % size] for i in [0, units_per_client); its calls' bytes.
  auto unit = [&](int c, int i) { return units[(c + i) % units.size()]; };
  auto call_bytes = [&](int c, int first, int n) {
    size_t b = 0;
    for (int i = first; i < std::min(units_per_client, first + n); ++i) b += unit(c, i).size();
    return b;
  };
  size_t total = 0;
  for (int c = 0; c < clients; ++c) total += call_bytes(c, 0, units_per_client);
  // Whether `got` is client c's stream from unit `first` on.
  auto matches = [&](int c, int first, std::string_view got) {
    for (int i = first; !got.empty() && i < units_per_client; ++i) {
      const std::string_view u = unit(c, i).substr(0, got.size());
      if (got.substr(0, u.size()) != u) return false;
      got.remove_prefix(u.size());
    }
    return got.empty();
  };

  // Each connection's three threads: t % 3 == 0 its client, 1 the server's socket side, 2 its disk
  // side; a failed one shuts the connection and its handoff, so that the other two stop waiting.
  std::vector<std::unique_ptr<Handoff>> handoffs;
  auto run_phase = [&](auto fn) {
    handoffs.clear();
    for (int c = 0; c < clients; ++c) handoffs.push_back(std::make_unique<Handoff>());
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = ProcessCpuSeconds();
    const bool ok = OnThreads(3 * clients, [&](int t) { return fn(t % 3, t / 3, *handoffs[t / 3]); },
                              [&](int t) {
                                ::shutdown(client_end[t / 3].fd, SHUT_RDWR);
                                ::shutdown(server_end[t / 3].fd, SHUT_RDWR);
                                handoffs[t / 3]->Close();
                              });
    return std::make_tuple(ok, t0, cpu0);
  };
  // Bytes per second and cores since a run's start.
  auto since = [&](std::chrono::steady_clock::time_point t0, double cpu0) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return std::make_pair(static_cast<double>(total) / s, (ProcessCpuSeconds() - cpu0) / s);
  };
  const uint8_t kToken = 1;  // a call's acknowledgement, or a GET call's request

  // Put: each client sends a call's units and waits for its acknowledgement; the server receives
  // them into a buffer, which is appended to the file whenever full and at the call's end, and
  // acknowledges the call once its last bytes are written.
  std::atomic<uint64_t> file_end{0};
  std::vector<std::vector<Block>> blocks(clients);
  auto [put_ok, put_t0, put_cpu0] = run_phase([&](int role, int c, Handoff& h) {
    const int fd = role == 0 ? client_end[c].fd : server_end[c].fd;
    uint8_t token = 0;
    for (int first = 0; first < units_per_client; first += put_call_units) {
      const int end = std::min(units_per_client, first + put_call_units);
      if (role == 0) {
        std::vector<iovec> v;
        for (int i = first; i < end; ++i) {
          v.push_back({const_cast<char*>(unit(c, i).data()), unit(c, i).size()});
          if (v.size() == kUnitsPerWrite || i + 1 == end) {
            if (!WriteAll(fd, v.data(), static_cast<int>(v.size()))) return false;
            v.clear();
          }
        }
        if (!RecvAll(fd, &token, 1)) return false;
      } else if (role == 1) {
        for (size_t left = call_bytes(c, first, put_call_units); left > 0;) {
          uint8_t* b = h.Fill();
          const size_t n = std::min(kBlock, left);
          if (b == nullptr || !RecvAll(fd, b, n)) return false;
          left -= n;
          h.Filled({b, n, left == 0});
        }
      } else {
        for (bool last = false; !last;) {
          const Piece p = h.Drain();
          if (p.data == nullptr) return false;
          const uint64_t at = file_end.fetch_add(Padded(p.bytes));
          if (::pwrite(file.fd, p.data, Padded(p.bytes), static_cast<off_t>(at)) != static_cast<ssize_t>(Padded(p.bytes)))
            return false;
          const uint64_t from = blocks[c].empty() ? 0 : blocks[c].back().from + blocks[c].back().bytes;
          blocks[c].push_back({from, at, p.bytes});
          last = p.last;
          h.Drained();
          if (last && !SendAll(fd, &kToken, 1)) return false;
        }
      }
    }
    return true;
  });
  const bool synced = ::fdatasync(file.fd) == 0;
  std::tie(r.put_bps, r.put_cores) = since(put_t0, put_cpu0);

  // Get: each client asks for a call's bytes and receives them; the server reads the blocks
  // holding them (4 KiB-aligned, at most one block a read) and sends them.
  std::vector<std::string> received(clients, std::string(kBlock, '\0'));
  auto [get_ok, get_t0, get_cpu0] = run_phase([&](int role, int c, Handoff& h) {
    const int fd = role == 0 ? client_end[c].fd : server_end[c].fd;
    uint64_t from = 0;
    size_t next_block = 0;  // the disk side: the first block not yet read to its end (calls go in order)
    uint8_t token = 0;
    for (int first = 0; first < units_per_client; first += get_call_units) {
      const size_t bytes = call_bytes(c, first, get_call_units);
      if (role == 0) {
        // (A verified call is received whole: a test's calls are small.)
        const size_t room = run.verify ? bytes : kBlock;
        if (received[c].size() < room) received[c].resize(room);
        if (!SendAll(fd, &kToken, 1)) return false;
        for (size_t left = bytes; left > 0;) {
          const size_t n = std::min(room, left);
          if (!RecvAll(fd, reinterpret_cast<uint8_t*>(received[c].data()), n)) return false;
          left -= n;
        }
        if (run.verify && !matches(c, first, std::string_view(received[c].data(), bytes))) return false;
      } else if (role == 2) {
        if (!RecvAll(fd, &token, 1)) return false;
        for (; next_block < blocks[c].size() && blocks[c][next_block].from < from + bytes; ++next_block) {
          const Block& b = blocks[c][next_block];
          const uint64_t lo = std::max(from, b.from), hi = std::min(from + bytes, b.from + b.bytes);
          const uint64_t at = b.at + (lo - b.from), aligned = at / kAlign * kAlign;
          const size_t n = Padded(at + (hi - lo) - aligned);
          uint8_t* buf = h.Fill();
          if (buf == nullptr || ::pread(file.fd, buf, n, static_cast<off_t>(aligned)) != static_cast<ssize_t>(n)) return false;
          h.Filled({buf + (at - aligned), hi - lo, hi == from + bytes});
          if (hi < b.from + b.bytes) break;  // the block goes on into the next call
        }
      } else {
        for (bool last = false; !last;) {
          const Piece p = h.Drain();
          if (p.data == nullptr || !SendAll(fd, p.data, p.bytes)) return false;
          last = p.last;
          h.Drained();
        }
      }
      from += bytes;
    }
    return true;
  });
  std::tie(r.get_bps, r.get_cores) = since(get_t0, get_cpu0);
  r.ok = put_ok && synced && get_ok;
  ::unlink(path.c_str());
  return r;
}

}  // namespace ds41
