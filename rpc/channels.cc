#include "rpc/channels.h"

namespace ds41 {

std::shared_ptr<grpc::Channel> ChannelSet::Get(const std::string& address) {
  std::lock_guard<std::mutex> l(mu_);
  auto& ch = channels_[address];
  if (!ch) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(max_);
    args.SetMaxSendMessageSize(max_);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    ch = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  }
  return ch;
}

}  // namespace ds41
