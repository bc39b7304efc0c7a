#include "router/node_table.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <cctype>
#include <chrono>

namespace ds41 {

const char* NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kPending: return "pending";
    case NodeState::kHealthy: return "healthy";
    case NodeState::kDown: return "down";
    case NodeState::kRefused: return "refused";
  }
  return "?";
}

NodeTable::NodeTable(const NodeClient* client, NodeTableOptions options) : client_(client), opt_(options) {}

NodeTable::~NodeTable() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (poller_.joinable()) poller_.join();
}

void NodeTable::Add(NodeRole role, const std::string& address) {
  MutexLock l(&mu_);
  if (address.rfind("dns:///", 0) == 0) {
    seeds_.emplace_back(role, address.substr(7));
    return;
  }
  discovered_.erase(address);  // named explicitly: stays whatever DNS says
  AddLocked(role, address);
}

void NodeTable::AddLocked(NodeRole role, const std::string& address) {
  auto [it, inserted] = nodes_.try_emplace(address);
  if (inserted) {
    it->second.address = address;
    it->second.load.address = address;
  }
  it->second.role = role;
}

Status CheckNodeAddress(const std::string& address) {
  const Status bad = InvalidArgumentError("a node registers with its own host:port (a DNS name, an IPv4 address or a "
                                          "bracketed IPv6 one; port 1..65535; at most 255 bytes)");
  if (address.empty() || address.size() > 255) return bad;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size() || address.size() - colon - 1 > 5) return bad;
  int port = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9') return bad;
    port = port * 10 + (address[i] - '0');
  }
  if (port < 1 || port > 65535) return bad;
  std::string_view host(address.data(), colon);
  if (host.front() == '[') {  // IPv6
    if (host.size() < 3 || host.back() != ']') return bad;
    for (char c : host.substr(1, host.size() - 2)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return bad;
    }
    return Status::Ok();
  }
  for (char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return bad;
  }
  return Status::Ok();
}

Status NodeTable::Register(NodeRole role, const std::string& address) {
  DS41_RETURN_IF_ERROR(CheckNodeAddress(address));
  // Under the lock: an address keeps its role, and the table its bound; `add` adds a new one.
  auto admit = [&](bool add) -> StatusOr<bool> {  // true: already held (as `role`)
    MutexLock l(&mu_);
    auto it = nodes_.find(address);
    if (it != nodes_.end()) {
      if (it->second.role != role) {
        return FailedPreconditionError(address + " is registered as " + NodeRoleName(it->second.role) + ": a node has one role");
      }
      return true;
    }
    if (nodes_.size() >= opt_.max_nodes) {
      return ResourceExhaustedError("the router holds " + std::to_string(opt_.max_nodes) + " nodes, its limit");
    }
    if (add) {
      discovered_.erase(address);
      AddLocked(role, address);
    }
    return false;
  };
  DS41_ASSIGN_OR_RETURN(const bool known, admit(/*add=*/false));
  if (known) return Poll(address);  // registered again: checked again
  // It proves its role before it is used: asked first, added only as what it answers it is.
  const StatusOr<NodeStatusReport> st = client_->Status(role, address, opt_.poll_deadline);
  if (!st.ok()) return UnavailableError(address + " does not answer: " + st.status().ToString());
  if (st->fingerprint != client_->fingerprint() || st->role != NodeRoleName(role)) {
    return FailedPreconditionError(address + " does not serve " + NodeRoleName(role) + " of the router's model");
  }
  DS41_RETURN_IF_ERROR(admit(/*add=*/true).status());
  return Poll(address);
}

Status NodeTable::Poll(const std::string& address) {
  NodeRole role;
  {
    MutexLock l(&mu_);
    auto it = nodes_.find(address);
    if (it == nodes_.end()) return NotFoundError("unknown node " + address);
    role = it->second.role;
  }
  // The report is at least as new as the call: work seen done after it is off the counts it returns.
  const auto asked = std::chrono::steady_clock::now();
  const StatusOr<NodeStatusReport> st = client_->Status(role, address, opt_.poll_deadline);
  ReleasableMutexLock l(&mu_);
  auto it = nodes_.find(address);
  if (it == nodes_.end()) return st.status();
  const NodeState before = it->second.state;
  Status s = ApplyReportLocked(it->second, st, asked);
  if (it->second.state != before && opt_.on_change) {
    const NodeView now = it->second;
    l.Release();
    opt_.on_change(now, before);
  }
  return s;
}

Status NodeTable::ApplyReportLocked(NodeView& n, const StatusOr<NodeStatusReport>& st,
                                    std::chrono::steady_clock::time_point asked) {
  const std::string& address = n.address;
  if (!st.ok()) {
    n.state = NodeState::kDown;
    n.error = st.status().ToString();
    return UnavailableError(address + " does not answer: " + st.status().ToString());
  }
  const std::string& fingerprint = client_->fingerprint();
  if (st->fingerprint != fingerprint || st->role != NodeRoleName(n.role)) {
    n.state = NodeState::kRefused;
    n.error = "node serves " + st->role + " of model " + st->fingerprint + ", the router expects " + NodeRoleName(n.role) +
              " of " + fingerprint;
    return FailedPreconditionError(n.error);
  }
  n.state = NodeState::kHealthy;
  n.error.clear();
  n.load.queued_tokens = st->queued_tokens;
  n.load.running = st->running;
  n.load.waiting = st->waiting;
  n.load.resident_bytes = st->resident_bytes;
  n.load.polled_at = asked;
  n.warm_sessions.clear();
  for (const auto& [id, length] : st->warm_sessions) n.warm_sessions[id] = length;
  return Status::Ok();
}

StatusOr<std::vector<std::string>> ResolveWithGetaddrinfo(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (const int e = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); e != 0)
    return UnavailableError("cannot resolve " + host + ": " + gai_strerror(e));
  std::vector<std::string> out;
  for (addrinfo* a = res; a; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    const void* src = a->ai_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
                                               : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
    if (!inet_ntop(a->ai_family, src, ip, sizeof(ip))) continue;
    out.push_back(a->ai_family == AF_INET6 ? "[" + std::string(ip) + "]:" + port : std::string(ip) + ":" + port);
  }
  freeaddrinfo(res);
  return out;
}

void NodeTable::ResolveSeeds() {
  std::vector<std::pair<NodeRole, std::string>> seeds;
  {
    MutexLock l(&mu_);
    seeds = seeds_;
  }
  for (const auto& [role, name] : seeds) {
    const auto colon = name.rfind(':');
    if (colon == std::string::npos) continue;
    auto addrs = opt_.resolver(name.substr(0, colon), name.substr(colon + 1));
    if (!addrs.ok()) continue;  // a failed lookup says nothing about the nodes
    MutexLock l(&mu_);
    for (const std::string& a : *addrs) {
      if (nodes_.count(a) == 0) discovered_[a] = name;
      AddLocked(role, a);
    }
    // Nodes this name brought that it no longer lists go once they are down.
    for (auto it = discovered_.begin(); it != discovered_.end();) {
      const bool listed = std::find(addrs->begin(), addrs->end(), it->first) != addrs->end();
      auto n = nodes_.find(it->first);
      if (it->second == name && !listed && (n == nodes_.end() || n->second.state != NodeState::kHealthy)) {
        if (n != nodes_.end()) nodes_.erase(n);
        it = discovered_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void NodeTable::PollAll() {
  ResolveSeeds();
  std::vector<std::string> addrs;
  {
    MutexLock l(&mu_);
    for (const auto& [a, n] : nodes_) addrs.push_back(a);
  }
  for (const std::string& a : addrs) (void)Poll(a);
}

void NodeTable::StartPolling() {
  poller_ = std::thread([this] {
    MutexLock l(&mu_);
    while (!cv_.WaitFor(&mu_, opt_.poll_interval, [this]() DS41_REQUIRES(mu_) { return stop_; })) {
      MutexUnlock u(&mu_);
      PollAll();
    }
  });
}

void NodeTable::MarkDown(const std::string& address, const std::string& why) {
  ReleasableMutexLock l(&mu_);
  auto it = nodes_.find(address);
  if (it == nodes_.end()) return;
  const NodeState before = it->second.state;
  it->second.state = NodeState::kDown;
  it->second.error = why;
  if (before != NodeState::kDown && opt_.on_change) {
    const NodeView now = it->second;
    l.Release();
    opt_.on_change(now, before);
  }
}

std::vector<NodeView> NodeTable::Healthy(NodeRole role) const {
  MutexLock l(&mu_);
  std::vector<NodeView> out;
  for (const auto& [a, n] : nodes_) {
    if (n.role == role && n.state == NodeState::kHealthy) out.push_back(n);
  }
  return out;
}

std::vector<NodeView> NodeTable::All() const {
  MutexLock l(&mu_);
  std::vector<NodeView> out;
  for (const auto& [a, n] : nodes_) out.push_back(n);
  return out;
}

}  // namespace ds41
