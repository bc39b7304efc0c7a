// ShardDataPath: the bulk data path to one cache shard: where it listens (asked over the gRPC
// control plane, see CacheClient; asked again after a failure), and a pool of idle connections so
// no call pays for a connect. A shard whose data path is off, speaks another wire version, differs
// in TLS from this process, or failed to probe or connect recently yields no channel: the caller
// then uses gRPC.
//
// Thread-safe: mu_ guards the known port, the next probe time and the idle pool; probes, connects
// and calls run outside it, each channel with one caller at a time.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "cache_client/data_channel.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

// What a shard advertises about its data path (port 0: none).
struct DataEndpoint {
  int port = 0;
  uint32_t wire_version = 0;
  bool tls = false;
};

class ShardDataPath {
 public:
  using Probe = std::function<StatusOr<DataEndpoint>(DataChannel::Deadline)>;
  // Runs one call's exchange on a channel it is given; returns whether any answer arrived.
  using Call = std::function<bool(DataChannel&)>;
  // `host`: the host the shard's gRPC address names; `tls`: this process's client context (null:
  // plaintext).
  ShardDataPath(std::string host, Probe probe, std::shared_ptr<asio::ssl::context> tls, TransportSecurity security);

  // Runs `call` on a channel (pooled, else newly connected) and pools the channel again when it is
  // still healthy. A pooled channel that breaks before its first answer was most likely closed by
  // the server while idle, just as it was reused: `call` then runs once more, on a new connection.
  // `call` is not run when there is no usable data path now; the caller sends what `call` left
  // unanswered over gRPC.
  void Run(DataChannel::Deadline deadline, const Call& call);

 private:
  struct Idle {
    std::unique_ptr<DataChannel> channel;
    std::chrono::steady_clock::time_point since;
  };
  std::unique_ptr<DataChannel> TakeIdle() DS41_EXCLUDES(mu_);  // a pooled channel fit for reuse, or null
  std::unique_ptr<DataChannel> Connect(DataChannel::Deadline deadline) DS41_EXCLUDES(mu_);  // null: no usable data path
  void Release(std::unique_ptr<DataChannel> channel) DS41_EXCLUDES(mu_);
  void FailedLocked(std::chrono::milliseconds retry_after) DS41_REQUIRES(mu_);

  const std::string host_;
  const Probe probe_;
  const std::shared_ptr<asio::ssl::context> tls_;
  const TransportSecurity security_;
  Mutex mu_;
  int port_ DS41_GUARDED_BY(mu_) = 0;  // 0: not known
  std::chrono::steady_clock::time_point next_probe_ DS41_GUARDED_BY(mu_) = {};
  std::deque<Idle> idle_ DS41_GUARDED_BY(mu_);  // oldest first
};

}  // namespace ds41
