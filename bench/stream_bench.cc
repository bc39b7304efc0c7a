// stream_bench: what an open stream costs a router replica (issue 42). It starts a pace_node (a node
// test double that streams one token every --token-ms: no model runs) and a router over it, then
// opens streaming chat requests through the router's HTTP front door in steps (1, 100, 1000, 10000 by
// default) and holds them open, mostly idle, as agent sessions are. At each step it reads the
// router's resident memory and thread count from /proc and times each new stream's first byte (the
// router's admission, tokenization, placement and the reply's first chunk). With every stream of the
// last step open (the router's --max-running), it offers --overload times as many again in waves of
// --wave and times their answers, which must be 429 with Retry-After. Each round starts fresh
// processes; the summary gives medians over the rounds with their range.
//
//   stream_bench [--steps 1,100,1000,10000] [--rounds 3] [--overload 2] [--token-ms 60000]
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>
#include <CLI/CLI.hpp>

#include "tests/support/child_process.h"
#include "util/process.h"
#include "tests/support/test_checkpoint.h"

namespace {

using Clock = std::chrono::steady_clock;

struct ProcSample {
  double rss_kib = 0;
  int threads = 0;
};

ProcSample ReadProc(pid_t pid) {
  return {ds41::ProcStatus(pid, "VmRSS"), ds41::testing::ThreadsOf(pid)};
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

// One HTTP request on its own connection, read until its status line is known; a stream then stays
// open (its reads go on, discarding tokens) until Close.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  using Done = std::function<void(Conn&)>;
  Conn(asio::io_context& io, asio::ip::tcp::endpoint ep, std::string request, Done on_first)
      : socket_(io), ep_(ep), request_(std::move(request)), on_first_(std::move(on_first)) {}

  void Start() {
    t0_ = Clock::now();
    socket_.async_connect(ep_, [self = shared_from_this()](const asio::error_code& ec) {
      if (ec) return self->Fail("connect: " + ec.message());
      asio::async_write(self->socket_, asio::buffer(self->request_),
                        [self](const asio::error_code& wec, size_t) {
                          if (wec) return self->Fail("write: " + wec.message());
                          self->Read();
                        });
    });
  }
  void Close() {
    asio::error_code ignored;
    socket_.close(ignored);
  }

  int status = 0;                // 0: none yet (or failed)
  bool retry_after = false;      // a Retry-After header came with it
  double first_byte_ms = 0;
  std::string error;

 private:
  void Read() {
    socket_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
      if (ec) {
        if (self->status == 0) self->Fail("read: " + ec.message());
        return;
      }
      if (self->status == 0) {
        self->head_.append(self->buf_.data(), n);
        const size_t eol = self->head_.find("\r\n");
        if (eol == std::string::npos) return self->Read();
        const size_t end = self->head_.find("\r\n\r\n");
        if (end == std::string::npos) return self->Read();
        self->first_byte_ms = std::chrono::duration<double, std::milli>(Clock::now() - self->t0_).count();
        self->status = std::atoi(self->head_.c_str() + 9);
        self->retry_after = self->head_.find("Retry-After:") != std::string::npos;
        self->head_.clear();
        self->on_first_(*self);
      }
      self->Read();
    });
  }
  void Fail(std::string why) {
    error = std::move(why);
    on_first_(*this);
  }

  asio::ip::tcp::socket socket_;
  asio::ip::tcp::endpoint ep_;
  std::string request_;
  Done on_first_;
  Clock::time_point t0_;
  std::array<char, 512> buf_{};
  std::string head_;
};

// One keep-alive connection that sends requests one after another while `budget` lasts, each timed
// from its write to its whole answer: a client pool under overload, as the official SDKs keep one.
class Prober : public std::enable_shared_from_this<Prober> {
 public:
  struct Answer {
    int status = 0;
    bool retry_after = false;
    double ms = 0;
  };
  Prober(asio::io_context& io, asio::ip::tcp::endpoint ep, std::string request, int* budget,
         std::vector<Answer>* answers, int* active)
      : socket_(io), ep_(ep), request_(std::move(request)), budget_(budget), answers_(answers), active_(active) {}

  void Start() {
    ++*active_;
    socket_.async_connect(ep_, [self = shared_from_this()](const asio::error_code& ec) {
      if (ec) return self->Stop();
      self->Next();
    });
  }

 private:
  void Next() {
    if (*budget_ <= 0) return Stop();
    --*budget_;
    t0_ = Clock::now();
    in_.clear();
    asio::async_write(socket_, asio::buffer(request_), [self = shared_from_this()](const asio::error_code& ec, size_t) {
      if (ec) return self->Stop();
      self->Read();
    });
  }
  void Read() {
    socket_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](const asio::error_code& ec, size_t n) {
      if (ec) return self->Stop();
      self->in_.append(self->buf_.data(), n);
      const size_t end = self->in_.find("\r\n\r\n");
      if (end == std::string::npos) return self->Read();
      const size_t cl = self->in_.find("Content-Length: ");
      const size_t body = cl == std::string::npos ? 0 : std::strtoul(self->in_.c_str() + cl + 16, nullptr, 10);
      if (self->in_.size() < end + 4 + body) return self->Read();
      Answer a;
      a.ms = std::chrono::duration<double, std::milli>(Clock::now() - self->t0_).count();
      a.status = std::atoi(self->in_.c_str() + 9);
      a.retry_after = self->in_.find("Retry-After:") != std::string::npos;
      self->answers_->push_back(a);
      // A stream (not refused) would hold the connection: close it and stop this prober.
      if (a.status != 429) return self->Stop();
      self->Next();
    });
  }
  void Stop() {
    asio::error_code ignored;
    socket_.close(ignored);
    --*active_;
  }

  asio::ip::tcp::socket socket_;
  asio::ip::tcp::endpoint ep_;
  std::string request_;
  int* budget_;
  std::vector<Answer>* answers_;
  int* active_;
  Clock::time_point t0_;
  std::array<char, 1024> buf_{};
  std::string in_;
};

// The router's ds41_router_running_requests gauge (-1 when unreadable).
int RunningGauge(const std::string& http) {
  const std::string metrics = ds41::testing::HttpGet(http, "/metrics");
  const std::string key = "\nds41_router_running_requests ";
  const size_t at = metrics.find(key);
  return at == std::string::npos ? -1 : std::atoi(metrics.c_str() + at + key.size());
}

std::string ChatRequest(int port, int i, int max_tokens) {
  const std::string body = R"({"stream":true,"max_tokens":)" + std::to_string(max_tokens) +
                           R"(,"messages":[{"role":"user","content":"session )" + std::to_string(i) +
                           R"(: read the file and tell me what the tool returned"}]})";
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
         "\r\nContent-Type: application/json\r\nx-session-id: s" + std::to_string(i) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Opens `n` connections with at most `window` waiting for their first byte at once; returns them
// once every one has its status (or failed).
std::vector<std::shared_ptr<Conn>> OpenMany(asio::io_context& io, asio::ip::tcp::endpoint ep, int port, int first_index,
                                            int n, int window, int max_tokens) {
  std::vector<std::shared_ptr<Conn>> conns;
  conns.reserve(static_cast<size_t>(n));
  int started = 0, answered = 0;
  std::function<void()> launch = [&] {
    while (started < n && started - answered < window) {
      auto c = std::make_shared<Conn>(io, ep, ChatRequest(port, first_index + started, max_tokens), [&](Conn&) {
        ++answered;
        launch();
      });
      conns.push_back(c);
      ++started;
      c->Start();
    }
  };
  launch();
  while (answered < n) io.run_one();
  return conns;
}

struct StepFigures {
  int streams = 0;
  double rss_mib = 0, kib_per_stream = 0, first_byte_p50 = 0, first_byte_p99 = 0;
  int threads = 0, ok = 0;
  int running = -1;  // the router's ds41_router_running_requests: every stream opened is still in flight
};

struct RoundFigures {
  std::vector<StepFigures> steps;
  ProcSample idle;
  int offered = 0, got_429 = 0, with_retry_after = 0, other = 0;
  double p50_429 = 0, p99_429 = 0, max_429 = 0;
};

RoundFigures RunRound(const std::vector<int>& steps, int overload, int wave, int token_ms, int max_tokens, bool verbose) {
  using ds41::testing::ChildProcess;
  const std::string bin = ds41::testing::BinaryDir();
  const std::string& model = ds41::testing::SmallServingCheckpoint();
  // Two test doubles: one answers as the encoder, one as the decoder (a node has one role).
  ChildProcess enc({bin + "/bench/pace_node", "--model", model, "--token-ms", std::to_string(token_ms)}, "pace_node ready");
  ChildProcess dec({bin + "/bench/pace_node", "--model", model, "--token-ms", std::to_string(token_ms)}, "pace_node ready");
  if (!enc.ready() || !dec.ready()) throw std::runtime_error("pace_node did not start");
  const int limit = steps.back();
  const std::string profile = ds41::testing::TempDir("stream-bench") + "/profile.json";
  // The test double's decoder holds every stream and its steps cost nothing (its tokens are paced,
  // not computed): the cost model is told so, or it would refuse streams as a real decoder's batch
  // limit and step time would.
  std::ofstream(profile) << R"({"decoder": {"max_running": )" << limit + 1
                         << R"(, "step_s": 0.0001, "step_seq_s": 0, "replay_token_s": 0}})" << "\n";
  ChildProcess router({bin + "/router/router", "--model", model, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
                       "--encoders", enc.fields()["grpc"], "--decoders", dec.fields()["grpc"], "--max-running", std::to_string(limit),
                       "--max-connections", std::to_string(limit + wave + 64), "--max-queue-seconds", "0",
                       "--cost-profile", profile},
                      "router ready");
  if (!router.ready()) throw std::runtime_error("router did not start");
  const std::string http = router.fields()["http"];
  const int port = std::stoi(http.substr(http.rfind(':') + 1));
  asio::io_context io;
  auto keep_running = asio::make_work_guard(io);  // run_one / run_for wait, even with nothing in flight
  const asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
  // Warm: one request end to end, so the first step does not time the router's start.
  for (auto& c : OpenMany(io, ep, port, -1, 1, 1, 1)) c->Close();
  const auto warm = Clock::now() + std::chrono::milliseconds(500);
  while (Clock::now() < warm) io.run_for(std::chrono::milliseconds(50));
  RoundFigures r;
  r.idle = ReadProc(router.pid());
  std::vector<std::shared_ptr<Conn>> open;
  for (int target : steps) {
    const int more = target - static_cast<int>(open.size());
    auto conns = OpenMany(io, ep, port, static_cast<int>(open.size()), more, 256, max_tokens);
    StepFigures s;
    s.streams = target;
    std::vector<double> first;
    s.ok = r.steps.empty() ? 0 : r.steps.back().ok;  // those of earlier steps are still open
    std::map<std::string, int> failed;  // status or error -> count
    for (auto& c : conns) {
      if (c->status == 200) {
        ++s.ok;
        first.push_back(c->first_byte_ms);
      } else {
        ++failed[c->status ? std::to_string(c->status) : c->error];
      }
    }
    for (const auto& [why, n] : failed) std::printf("  %d streams not opened: %s\n", n, why.c_str());
    open.insert(open.end(), conns.begin(), conns.end());
    // Let the streams settle into their idle wait (the router's queues drain, freed memory is reused).
    const auto settle = Clock::now() + std::chrono::seconds(1);
    while (Clock::now() < settle) io.run_for(std::chrono::milliseconds(50));
    const ProcSample p = ReadProc(router.pid());
    s.running = RunningGauge(http);
    s.rss_mib = p.rss_kib / 1024;
    s.threads = p.threads;
    s.kib_per_stream = (p.rss_kib - r.idle.rss_kib) / target;
    s.first_byte_p50 = Percentile(first, 0.5);
    s.first_byte_p99 = Percentile(first, 0.99);
    if (verbose) {
      std::printf("  %6d streams: %d ok, %d running, router RSS %.1f MiB (%.2f KiB/stream over idle), %d threads, first byte p50 %.2f ms p99 %.2f ms\n",
                  target, s.ok, s.running, s.rss_mib, s.kib_per_stream, s.threads, s.first_byte_p50, s.first_byte_p99);
    }
    r.steps.push_back(s);
  }
  // Overload: the router is at its limit; `overload` times as many more are offered by `wave`
  // keep-alive clients, each sending its next request as soon as its last was answered.
  std::vector<double> lat;
  int budget = overload * limit, active = 0;
  std::vector<Prober::Answer> answers;
  for (int k = 0; k < wave; ++k) {
    std::make_shared<Prober>(io, ep, ChatRequest(port, 1000000 + k, max_tokens), &budget, &answers, &active)->Start();
  }
  while (active > 0) io.run_one();
  for (const Prober::Answer& a : answers) {
    ++r.offered;
    if (a.status == 429) {
      ++r.got_429;
      r.with_retry_after += a.retry_after;
      lat.push_back(a.ms);
    } else {
      ++r.other;
      if (r.other <= 3) std::printf("  an overload request answered %d\n", a.status);
    }
  }
  r.offered += budget > 0 ? budget : 0;  // not sent: a client's connection failed
  r.other += budget > 0 ? budget : 0;
  r.p50_429 = Percentile(lat, 0.5);
  r.p99_429 = Percentile(lat, 0.99);
  r.max_429 = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end());
  if (verbose) {
    std::printf("  overload: %d offered beyond %d open, %d answered 429 (%d with Retry-After), %d otherwise; 429 p50 %.2f ms p99 %.2f ms max %.2f ms\n",
                r.offered, limit, r.got_429, r.with_retry_after, r.other, r.p50_429, r.p99_429, r.max_429);
  }
  for (auto& c : open) c->Close();
  return r;
}

struct Spread {
  double median, lo, hi;
};
Spread SpreadOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stream_bench: the router's cost per open stream, and its 429s at its limit"};
  std::vector<int> steps = {1, 100, 1000, 10000};
  int rounds = 3, overload = 2, wave = 100, token_ms = 60000, max_tokens = 4;
  app.add_option("--steps", steps, "open streams at each step (the last is the router's --max-running)")->delimiter(',');
  app.add_option("--rounds", rounds, "rounds, each with fresh processes")->check(CLI::Range(1, 100));
  app.add_option("--overload", overload, "requests offered beyond the limit, as a multiple of it")->check(CLI::Range(0, 100));
  app.add_option("--wave", wave, "keep-alive clients offering the overload, one request in flight each")->check(CLI::Range(1, 100000));
  app.add_option("--token-ms", token_ms, "the test double's pace: milliseconds between a stream's tokens");
  app.add_option("--max-tokens", max_tokens, "tokens per reply (with --token-ms: how long a stream lasts)");
  CLI11_PARSE(app, argc, argv);
  std::sort(steps.begin(), steps.end());
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);  // children inherit it
  if (static_cast<rlim_t>(steps.back() + wave + 256) > nofile.rlim_cur) {
    std::cerr << "the last step (" << steps.back() << ") plus a wave (" << wave << ") needs more file descriptors than this "
              << "host allows a process (" << nofile.rlim_cur << ")\n";
    return 2;
  }
  std::printf("stream_bench: %d rounds, steps", rounds);
  for (int s : steps) std::printf(" %d", s);
  std::printf(", a token every %d ms, overload %dx in waves of %d, %ld CPUs\n", token_ms, overload, wave,
              sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<RoundFigures> all;
  for (int i = 0; i < rounds; ++i) {
    std::printf("round %d\n", i + 1);
    all.push_back(RunRound(steps, overload, wave, token_ms, max_tokens, true));
  }
  std::printf("\nsummary (median [min, max] over %d rounds)\n", rounds);
  for (size_t k = 0; k < steps.size(); ++k) {
    std::vector<double> kib, thr, p99, rss;
    int ok = steps[k];
    for (const auto& r : all) {
      kib.push_back(r.steps[k].kib_per_stream);
      thr.push_back(r.steps[k].threads);
      p99.push_back(r.steps[k].first_byte_p99);
      rss.push_back(r.steps[k].rss_mib);
      ok = std::min(ok, r.steps[k].ok);
    }
    const Spread a = SpreadOf(kib), t = SpreadOf(thr), p = SpreadOf(p99), m = SpreadOf(rss);
    std::printf("%6d streams (fewest ok %d): router RSS %.1f MiB [%.1f, %.1f], %.2f KiB/stream [%.2f, %.2f], threads %.0f [%.0f, %.0f], first byte p99 %.2f ms [%.2f, %.2f]\n",
                steps[k], ok, m.median, m.lo, m.hi, a.median, a.lo, a.hi, t.median, t.lo, t.hi, p.median, p.lo, p.hi);
  }
  std::vector<double> p99, p50;
  int non429 = 0, no_retry = 0, not_open = 0;
  for (const auto& r : all) {
    for (const auto& s : r.steps) not_open += s.streams - std::min(s.ok, s.running);
    p99.push_back(r.p99_429);
    p50.push_back(r.p50_429);
    non429 += r.other;
    no_retry += r.got_429 - r.with_retry_after;
  }
  const Spread a = SpreadOf(p50), b = SpreadOf(p99);
  std::printf("429 at %dx the limit: p50 %.2f ms [%.2f, %.2f], p99 %.2f ms [%.2f, %.2f]; answered otherwise: %d, 429 without Retry-After: %d\n",
              overload + 1, a.median, a.lo, a.hi, b.median, b.lo, b.hi, non429, no_retry);
  if (not_open > 0) std::printf("streams that did not open or did not stay open: %d\n", not_open);
  return non429 == 0 && no_retry == 0 && not_open == 0 ? 0 : 1;
}
