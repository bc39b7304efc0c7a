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

void InflightLoads::AddDone(std::unordered_map<std::string, Done>& m, const std::string& node, Clock::time_point t,
                            int64_t requests, int64_t tokens) {
  if (node.empty()) return;
  Done& d = m[node];
  d.push_back({t, Count{requests, tokens}});
  if (d.size() > kMaxDone) d.pop_front();
}

void InflightLoads::Started(const Placement& p) {
  MutexLock l(&mu_);
  Add(decoders_, p.decoder, 1, 0);
  Add(encoders_, p.encoder, 1, p.encoder_tokens);
}

void InflightLoads::Prefilled(const Placement& p, Clock::time_point now) {
  MutexLock l(&mu_);
  Add(encoders_, p.encoder, -1, -p.encoder_tokens);
  AddDone(encoders_done_, p.encoder, now, 1, p.encoder_tokens);
}

void InflightLoads::Ended(const Placement& p, bool prefilled, Clock::time_point now) {
  MutexLock l(&mu_);
  Add(decoders_, p.decoder, -1, 0);
  AddDone(decoders_done_, p.decoder, now, 1, 0);
  // Not prefilled: the encoder dropped the request (failed or cancelled), so it left its queue too.
  if (!prefilled) {
    Add(encoders_, p.encoder, -1, -p.encoder_tokens);
    AddDone(encoders_done_, p.encoder, now, 1, p.encoder_tokens);
  }
}

InflightLoads::Count InflightLoads::DoneSincePoll(Done* done, const NodeLoad& n) {
  Count c;
  if (!done || !n.polled_at) return c;
  // A poll is never older than the last one applied, so what it covers is not needed again.
  while (!done->empty() && done->front().first <= *n.polled_at) done->pop_front();
  for (const auto& [t, d] : *done) {
    if (t <= *n.polled_at) continue;  // recorded out of order by a few microseconds
    c.requests += d.requests;
    c.tokens += d.tokens;
  }
  return c;
}

void InflightLoads::Adjust(const Count* inflight, Done* done, NodeLoad& n) {
  // What finished since the poll leaves the polled counts: tokens from the queue, requests from the
  // waiting ones first. (A prefill's tokens were partly done at poll time already, so the queue may
  // come out short by that part, never below this router's own count.)
  const Count finished = DoneSincePoll(done, n);
  n.queued_tokens = std::max<int64_t>(0, n.queued_tokens - finished.tokens);
  const int64_t from_waiting = std::min(finished.requests, n.waiting);
  n.waiting -= from_waiting;
  n.running = std::max<int64_t>(0, n.running - (finished.requests - from_waiting));
  if (!inflight) return;
  // The node's own split into running and waiting is unknown here: the surplus waits.
  n.queued_tokens = std::max(n.queued_tokens, inflight->tokens);
  n.waiting += std::max<int64_t>(0, inflight->requests - (n.running + n.waiting));
}

namespace {

template <typename Map>
auto* Find(Map& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

}  // namespace

void InflightLoads::Apply(std::vector<NodeLoad>* decoders, std::vector<NodeLoad>* encoders) const {
  MutexLock l(&mu_);
  for (NodeLoad& d : *decoders) Adjust(Find(decoders_, d.address), Find(decoders_done_, d.address), d);
  for (NodeLoad& e : *encoders) Adjust(Find(encoders_, e.address), Find(encoders_done_, e.address), e);
}

void InflightLoads::Apply(std::vector<NodeLoad>* decoders, std::vector<NodeLoad>* encoders,
                          const std::function<int(const std::string&, bool)>& index_of) const {
  MutexLock l(&mu_);
  auto walk = [&](const std::unordered_map<std::string, Count>& counts, std::unordered_map<std::string, Done>& done,
                  std::vector<NodeLoad>* nodes, bool is_decoder) {
    auto adjust = [&](const std::string& address) {
      const int i = index_of(address, is_decoder);
      if (i < 0 || static_cast<size_t>(i) >= nodes->size()) return;
      NodeLoad& n = (*nodes)[static_cast<size_t>(i)];
      if (n.address == address) Adjust(Find(counts, address), Find(done, address), n);
    };
    for (const auto& entry : counts) adjust(entry.first);
    for (const auto& entry : done) {
      if (!counts.count(entry.first)) adjust(entry.first);
    }
  };
  walk(decoders_, decoders_done_, decoders, true);
  walk(encoders_, encoders_done_, encoders, false);
}

}  // namespace ds41
