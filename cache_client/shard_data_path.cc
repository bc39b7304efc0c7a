#include "cache_client/shard_data_path.h"

#include <vector>

namespace ds41 {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxIdle = 32;                                // pooled connections per shard
constexpr std::chrono::milliseconds kRetryAfterFailure{1000};  // gRPC only meanwhile
constexpr std::chrono::milliseconds kRecheckWithout{10000};    // a shard without a usable data path
// Well inside the server's idle timeout (5 min): reusing a connection the server is closing just
// then fails the call's first exchange, so a pooled connection is not kept that long.
constexpr std::chrono::seconds kMaxIdleAge{60};

}  // namespace

ShardDataPath::ShardDataPath(std::string host, Probe probe, std::shared_ptr<asio::ssl::context> tls, TransportSecurity security)
    : host_(std::move(host)), probe_(std::move(probe)), tls_(std::move(tls)), security_(std::move(security)) {}

void ShardDataPath::FailedLocked(std::chrono::milliseconds retry_after) {
  port_ = 0;
  idle_.clear();
  next_probe_ = Clock::now() + retry_after;
}

void ShardDataPath::Run(DataChannel::Deadline deadline, const Call& call) {
  if (std::unique_ptr<DataChannel> c = TakeIdle()) {
    const bool answered = call(*c);
    if (!c->broken() || answered || Clock::now() >= deadline) {
      Release(std::move(c));
      return;
    }
  }
  if (std::unique_ptr<DataChannel> c = Connect(deadline)) {
    // A new connection that answers nothing (it accepts but hangs) says the shard's data path is
    // failing, as a refused connect does: gRPC only for a while, not a deadline lost every call.
    if (!call(*c) && c->broken()) {
      MutexLock l(&mu_);
      FailedLocked(kRetryAfterFailure);
      return;
    }
    Release(std::move(c));
  }
}

std::unique_ptr<DataChannel> ShardDataPath::TakeIdle() {
  // The lock only guards the list: the staleness poll and the closes of dropped channels are
  // system calls, made after it is released.
  std::vector<std::unique_ptr<DataChannel>> dropped;
  for (;;) {
    std::unique_ptr<DataChannel> c;
    {
      MutexLock l(&mu_);
      const auto too_old = Clock::now() - kMaxIdleAge;
      while (!idle_.empty() && idle_.front().since < too_old) {
        dropped.push_back(std::move(idle_.front().channel));
        idle_.pop_front();
      }
      if (idle_.empty()) return nullptr;
      c = std::move(idle_.back().channel);  // the most recently used first
      idle_.pop_back();
    }
    if (!c->Stale()) return c;
    dropped.push_back(std::move(c));  // closed by the server's idle timeout: try the next
  }
}

std::unique_ptr<DataChannel> ShardDataPath::Connect(DataChannel::Deadline deadline) {
  int port;
  {
    MutexLock l(&mu_);
    if (port_ == 0 && Clock::now() < next_probe_) return nullptr;
    port = port_;
  }
  if (port == 0) {
    auto ep = probe_(deadline);
    MutexLock l(&mu_);
    if (!ep.ok()) {
      FailedLocked(kRetryAfterFailure);
      return nullptr;
    }
    if (ep->port <= 0 || ep->wire_version != wire::kWireVersion || ep->tls != security_.tls()) {
      FailedLocked(kRecheckWithout);
      return nullptr;
    }
    port = port_ = ep->port;
  }
  auto c = DataChannel::Connect(host_, port, tls_, security_, deadline);
  if (!c.ok()) {
    MutexLock l(&mu_);
    FailedLocked(kRetryAfterFailure);
    return nullptr;
  }
  return std::move(*c);
}

void ShardDataPath::Release(std::unique_ptr<DataChannel> channel) {
  // A broken channel goes alone: its failure (a deadline, a connection the server closed) says
  // nothing about the shard's other connections, which a failed connect or probe would.
  if (channel->broken()) return;
  MutexLock l(&mu_);
  if (port_ != 0 && idle_.size() < kMaxIdle) idle_.push_back({std::move(channel), Clock::now()});
}

}  // namespace ds41
