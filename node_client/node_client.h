// NodeClient: every call to an encoder or decoder node goes through here (the router, the decoder's
// prefill calls, the encoder's SWA-state fetches, the tests): one place builds the messages
// (node_codec.h), sets deadlines, maps gRPC status to ds41::Status and wires cancellation.
//
// Thread-safe: one client per process is shared by all callers (channels are reused per address).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "node_client/node_messages.h"
#include "rpc/channels.h"
#include "util/cancel_token.h"
#include "util/status.h"

namespace ds41 {

// Gets each batch of newly generated ids (and their log-probabilities when asked) in order;
// returning false stops the generation.
using TokenBatchSink = std::function<bool(const GeneratedTokens& tokens)>;

struct GenerateCallResult {
  Status status;                 // the call's end (CANCELLED when the token cancelled it)
  bool stopped = false;          // the sink returned false: the rest was cancelled on purpose
  GenerateEnd end;               // finish reason and usage, when the decoder sent them
};

class NodeClient {
 public:
  NodeClient(std::shared_ptr<ChannelSet> channels, std::string fingerprint);

  // Encoder.Prefill, by `deadline`, without holding a thread: `done` gets the outcome once, on a
  // gRPC thread (it must not block). A cancelled token cancels the call.
  void PrefillAsync(const std::string& encoder, const PrefillInput& in, std::chrono::steady_clock::time_point deadline,
                    std::shared_ptr<CancelToken> cancel, std::function<void(StatusOr<PrefillOutput>)> done) const;
  // PrefillAsync waited for on this thread.
  StatusOr<PrefillOutput> Prefill(const std::string& encoder, const PrefillInput& in,
                                  std::chrono::steady_clock::time_point deadline, CancelToken* cancel = nullptr) const;

  // Decoder.Generate by in.deadline without holding a thread: `sink` gets each batch of ids as it
  // arrives and `done` the call's end, both on gRPC's callback threads (one batch at a time, in
  // order, `done` last and once), so neither may block. A cancelled token cancels the call. A
  // message whose log-probabilities do not match its ids ends the call with INTERNAL.
  void GenerateAsync(const std::string& decoder, const GenerateInput& in, std::shared_ptr<CancelToken> cancel,
                     TokenBatchSink sink, std::function<void(GenerateCallResult)> done) const;
  // GenerateAsync waited for on this thread (tests and tools).
  GenerateCallResult Generate(const std::string& decoder, const GenerateInput& in, CancelToken* cancel,
                              const TokenBatchSink& sink) const;

  // SwaState.GetSwaState from any node (both roles serve it): the serialized state, or NOT_FOUND.
  StatusOr<std::string> FetchSwa(const std::string& peer, const UnitKey& ns, const UnitKey& prefix_key,
                                 int64_t position, std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

  // The node's Status as its role's service reports it.
  StatusOr<NodeStatusReport> Status(NodeRole role, const std::string& address, std::chrono::milliseconds timeout) const;

  const std::string& fingerprint() const { return fingerprint_; }

 private:
  std::shared_ptr<ChannelSet> channels_;
  const std::string fingerprint_;
};

}  // namespace ds41
