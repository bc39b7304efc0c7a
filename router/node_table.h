// NodeTable: the router's soft state about encoder and decoder nodes. Nodes join by address (flags
// or the Register RPC) or through a DNS name ("dns:///name:port", e.g. a headless Service) that is
// resolved again at every poll, each address becoming a node; a node is admitted only when its Status reports the router's model
// fingerprint, and is health-checked by polling Status. A node that fails a poll or a request is
// marked down until a poll succeeds again. A node found through DNS leaves the table once its name
// resolves without it and it is down (a healthy one may be draining; a failed lookup removes
// nothing). Thread-safe: mu_ guards the table; polls run outside it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "node_client/node_client.h"
#include "router/placement.h"
#include "util/status.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

enum class NodeState { kPending, kHealthy, kDown, kRefused };  // kRefused: wrong model fingerprint
const char* NodeStateName(NodeState s);

struct NodeView {
  std::string address;
  NodeRole role = NodeRole::kDecoder;
  NodeState state = NodeState::kPending;
  std::string error;                    // why down or refused
  NodeLoad load;
  std::map<std::string, int64_t> warm_sessions;  // session -> context length the decoder holds
};

// "host", "port" -> the addresses ("ip:port", "[ipv6]:port") the name resolves to, or an error.
using Resolver = std::function<StatusOr<std::vector<std::string>>(const std::string& host, const std::string& port)>;
StatusOr<std::vector<std::string>> ResolveWithGetaddrinfo(const std::string& host, const std::string& port);

struct NodeTableOptions {
  std::chrono::milliseconds poll_interval{1000};
  std::chrono::milliseconds poll_deadline{1000};
  Resolver resolver = ResolveWithGetaddrinfo;
  // Told of each change of a node's state (the view as it is now, the state before), outside the
  // table's lock; the router logs them, so a node going down and back shows in its log.
  std::function<void(const NodeView& now, NodeState before)> on_change;
  // Nodes the table holds at most once registration (Register) would add one more.
  size_t max_nodes = 1024;
};

// A node's own address as registration accepts it: host:port, the host a DNS name, an IPv4 address
// or a bracketed IPv6 one, the port 1..65535, 255 bytes at most; INVALID_ARGUMENT otherwise (the
// message never echoes the bytes given).
Status CheckNodeAddress(const std::string& address);

class NodeTable {
 public:
  // Polls through `client` (whose fingerprint the nodes must report).
  NodeTable(const NodeClient* client, NodeTableOptions options = {});
  ~NodeTable();

  void Add(NodeRole role, const std::string& address);  // "host:port" or "dns:///name:port"
  // A node registering itself (the admin service): `address` must pass CheckNodeAddress, and the
  // node must prove its role first: it is asked for its Status and joins only when it answers as
  // `role` of the router's model (UNAVAILABLE when it does not answer, FAILED_PRECONDITION when it
  // is something else; neither is added). An address already held under another role is refused
  // (FAILED_PRECONDITION) and left as it is; a new one beyond max_nodes is RESOURCE_EXHAUSTED.
  Status Register(NodeRole role, const std::string& address);
  void PollAll();                       // one round of Status calls
  // A round every poll_interval on a thread of its own, the first one interval from now (the caller
  // has just polled: a second round at once would only repeat it).
  void StartPolling();
  void MarkDown(const std::string& address, const std::string& why);

  std::vector<NodeView> Healthy(NodeRole role) const;
  std::vector<NodeView> All() const;

 private:
  Status Poll(const std::string& address);
  // The node's state and load from its report (or the failed call), mu_ held.
  Status ApplyReportLocked(NodeView& n, const StatusOr<NodeStatusReport>& st, std::chrono::steady_clock::time_point asked)
      DS41_REQUIRES(mu_);
  void AddLocked(NodeRole role, const std::string& address) DS41_REQUIRES(mu_);
  void ResolveSeeds();

  const NodeClient* client_;
  const NodeTableOptions opt_;
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<std::pair<NodeRole, std::string>> seeds_ DS41_GUARDED_BY(mu_);  // DNS names
  std::map<std::string, NodeView> nodes_ DS41_GUARDED_BY(mu_);
  std::map<std::string, std::string> discovered_ DS41_GUARDED_BY(mu_);  // address -> the DNS name that brought it
  bool stop_ DS41_GUARDED_BY(mu_) = false;
  std::thread poller_;
};

}  // namespace ds41
