#include "rpc/channels.h"

#include "rpc/transport_security.h"
#include "util/mutex.h"

namespace ds41 {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, int max_message_bytes) {
  const TransportSecurity security = ProcessTransportSecurity();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(max_message_bytes);
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  security.ApplyTo(&args);
  return grpc::CreateCustomChannel(address, security.ChannelCredentials(), args);
}

std::shared_ptr<grpc::Channel> ChannelSet::Get(const std::string& address) {
  MutexLock l(&mu_);
  auto& ch = channels_[address];
  if (!ch) ch = MakeChannel(address, max_);
  return ch;
}

}  // namespace ds41
