#include "router/inflight_loads.h"

#include <algorithm>

namespace ds41 {

void InflightLoads::Add(std::unordered_map<std::string, Count>& m, const std::string& node, int64_t requests, int64_t tokens) {
  if (node.empty()) return;
  Count& c = m[node];
  c.requests += requests;
  c.tokens += tokens;
  if (c.requests <= 0 && c.tokens <= 0) m.erase(node);
}

void InflightLoads::Started(const Placement& p) {
  std::lock_guard<std::mutex> l(mu_);
  Add(decoders_, p.decoder, 1, 0);
  Add(encoders_, p.encoder, 1, p.encoder_tokens);
}

void InflightLoads::Prefilled(const Placement& p) {
  std::lock_guard<std::mutex> l(mu_);
  Add(encoders_, p.encoder, -1, -p.encoder_tokens);
}

void InflightLoads::Ended(const Placement& p, bool prefilled) {
  std::lock_guard<std::mutex> l(mu_);
  Add(decoders_, p.decoder, -1, 0);
  if (!prefilled) Add(encoders_, p.encoder, -1, -p.encoder_tokens);
}

void InflightLoads::ApplyDecoder(const Count& c, NodeLoad& d) {
  // The decoder's own split into running and waiting is unknown here: the surplus waits.
  d.waiting += std::max<int64_t>(0, c.requests - (d.running + d.waiting));
}

void InflightLoads::ApplyEncoder(const Count& c, NodeLoad& e) {
  e.queued_tokens = std::max(e.queued_tokens, c.tokens);
  e.waiting += std::max<int64_t>(0, c.requests - (e.running + e.waiting));
}

void InflightLoads::Apply(std::vector<NodeLoad>* decoders, std::vector<NodeLoad>* encoders) const {
  std::lock_guard<std::mutex> l(mu_);
  for (NodeLoad& d : *decoders) {
    auto it = decoders_.find(d.address);
    if (it != decoders_.end()) ApplyDecoder(it->second, d);
  }
  for (NodeLoad& e : *encoders) {
    auto it = encoders_.find(e.address);
    if (it != encoders_.end()) ApplyEncoder(it->second, e);
  }
}

void InflightLoads::Apply(std::vector<NodeLoad>* decoders, std::vector<NodeLoad>* encoders,
                          const std::function<int(const std::string&, bool)>& index_of) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [address, c] : decoders_) {
    const int i = index_of(address, true);
    if (i >= 0 && static_cast<size_t>(i) < decoders->size() && (*decoders)[static_cast<size_t>(i)].address == address)
      ApplyDecoder(c, (*decoders)[static_cast<size_t>(i)]);
  }
  for (const auto& [address, c] : encoders_) {
    const int i = index_of(address, false);
    if (i >= 0 && static_cast<size_t>(i) < encoders->size() && (*encoders)[static_cast<size_t>(i)].address == address)
      ApplyEncoder(c, (*encoders)[static_cast<size_t>(i)]);
  }
}

}  // namespace ds41
