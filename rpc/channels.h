// A process-wide set of gRPC channels to peers, one per address, created on first use.
//
// ChannelSet is thread-safe: mu_ guards the address -> channel map (the channels are themselves
// thread-safe and are used outside the lock).
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>

#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

// A channel to `address` with this process's transport security, bounded messages and quick
// reconnects (a peer restarting should be usable again within a second).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, int max_message_bytes);

class ChannelSet {
 public:
  explicit ChannelSet(int max_message_bytes = 512 << 20) : max_(max_message_bytes) {}
  std::shared_ptr<grpc::Channel> Get(const std::string& address);

 private:
  const int max_;
  Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ DS41_GUARDED_BY(mu_);
};

}  // namespace ds41
