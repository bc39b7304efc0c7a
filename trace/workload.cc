#include "trace/workload.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace ds41 {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int64_t Scaled(int64_t n, double scale) { return static_cast<int64_t>(std::llround(static_cast<double>(n) * scale)); }

// Links each request to a session by the trie of complete-block prefixes (workload.h).
class SessionTrie {
 public:
  // The session number for a request with `blocks`, of which the first `complete` are full.
  int64_t Assign(const std::vector<int64_t>& blocks, size_t complete) {
    // Longest earlier complete prefix on this request's path: walk while the trie has the blocks.
    int64_t session = -1;
    int32_t node = 0;
    for (int64_t id : blocks) {
      auto it = children_.find(Key{node, id});
      if (it == children_.end()) break;
      node = it->second;
      if (mark_[node] >= 0) session = mark_[node];
    }
    if (session < 0) session = next_session_++;
    if (complete >= 2) {
      node = 0;
      for (size_t i = 0; i < complete; ++i) {
        auto [it, added] = children_.try_emplace(Key{node, blocks[i]}, static_cast<int32_t>(mark_.size()));
        if (added) mark_.push_back(-1);
        node = it->second;
      }
      mark_[node] = session;  // the latest request ending here wins ties
    }
    return session;
  }

  int64_t sessions() const { return next_session_; }

 private:
  struct Key {
    int32_t parent;
    int64_t id;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return static_cast<size_t>(SplitMix64(static_cast<uint64_t>(k.id)) ^ static_cast<uint64_t>(k.parent));
    }
  };
  std::unordered_map<Key, int32_t, KeyHash> children_;
  std::vector<int64_t> mark_ = {-1};  // per node: the session ending its complete blocks there, or -1
  int64_t next_session_ = 0;
};

}  // namespace

std::vector<WorkloadRequest> BuildWorkload(const std::vector<TraceRequest>& trace, const WorkloadOptions& options) {
  const int trace_block = std::max(1, options.trace_block_tokens);
  const int block_tokens = static_cast<int>(std::max<int64_t>(1, Scaled(trace_block, options.token_scale)));
  // The window counts from the file's first request, whatever time its clock starts at (the second
  // half of a day's trace starts at 1,800 s).
  double origin_ms = 0;
  if (!trace.empty()) {
    origin_ms = static_cast<double>(trace.front().timestamp_ms);
    for (const TraceRequest& t : trace) origin_ms = std::min(origin_ms, static_cast<double>(t.timestamp_ms));
  }
  const double start_ms = origin_ms + options.start_s * 1000;
  const double end_ms = origin_ms + (options.start_s + options.duration_s) * 1000;  // +inf by default
  const int replicas = std::max(1, options.replicas);

  int64_t max_id = -1;
  for (const TraceRequest& t : trace) {
    for (int64_t id : t.hash_ids) max_id = std::max(max_id, id);
  }
  const int64_t id_stride = max_id + 1;

  // One copy of the window, with sessions numbered from 0.
  std::vector<WorkloadRequest> base;
  std::vector<int64_t> base_session;  // per base request: its session number
  SessionTrie trie;
  int64_t first_ms = -1;
  for (const TraceRequest& t : trace) {
    const double ts = static_cast<double>(t.timestamp_ms);
    if (ts < start_ms || ts >= end_ms) continue;
    if (first_ms < 0) first_ms = t.timestamp_ms;
    WorkloadRequest w;
    w.arrival_s = static_cast<double>(t.timestamp_ms - first_ms) / 1000 * options.time_scale;
    w.block_tokens = block_tokens;
    w.blocks = t.hash_ids;
    const int64_t b = static_cast<int64_t>(w.blocks.size());
    w.prompt_tokens = std::max<int64_t>(1, Scaled(t.input_length, options.token_scale));
    if (b > 0) w.prompt_tokens = std::clamp<int64_t>(w.prompt_tokens, (b - 1) * block_tokens + 1, b * block_tokens);
    w.output_tokens = std::max<int64_t>(1, Scaled(t.output_length, options.token_scale * options.output_scale));
    const size_t complete = static_cast<size_t>(std::min<int64_t>(t.input_length / trace_block, b));
    base_session.push_back(trie.Assign(t.hash_ids, complete));
    base.push_back(std::move(w));
  }
  const int64_t sessions = trie.sessions();
  if (options.session_sample > 1) {
    size_t kept = 0;
    for (size_t i = 0; i < base.size(); ++i) {
      if (base_session[i] % options.session_sample != 0) continue;
      if (kept != i) {  // (a move onto itself would empty the request's blocks)
        base[kept] = std::move(base[i]);
        base_session[kept] = base_session[i];
      }
      ++kept;
    }
    base.resize(kept);
    base_session.resize(kept);
    const double first = base.empty() ? 0 : base.front().arrival_s;
    for (WorkloadRequest& w : base) w.arrival_s -= first;
  }

  std::vector<WorkloadRequest> out;
  const size_t cap = options.max_requests < 0 ? base.size() * replicas : static_cast<size_t>(options.max_requests);
  const bool stagger = options.replica_stagger && replicas > 1 && !base.empty();
  // Staggered copies are sorted by arrival below, so the cap applies after that.
  out.reserve(stagger ? base.size() * replicas : std::min(cap, base.size() * replicas));
  std::unordered_map<int64_t, double> session_first;  // per base session: its first arrival
  const double span = base.empty() ? 0 : base.back().arrival_s;
  if (stagger) {
    for (size_t i = 0; i < base.size(); ++i) session_first.try_emplace(base_session[i], base[i].arrival_s);
  }
  for (size_t i = 0; i < base.size() && (stagger || out.size() < cap); ++i) {
    for (int r = 0; r < replicas && (stagger || out.size() < cap); ++r) {
      WorkloadRequest c = base[i];
      c.index = static_cast<int64_t>(out.size());
      for (int64_t& id : c.blocks) id += r * id_stride;
      c.session = "s" + std::to_string(r * sessions + base_session[i]);
      if (stagger && span > 0) {
        const double first = session_first.at(base_session[i]);
        double moved = first + span * r / replicas;  // copy 0 stays the trace
        if (moved > span) moved -= span;
        c.arrival_s = moved + (c.arrival_s - first);
        // Past the window's end, as the window leaves out turns past its own: the rate stays even.
        if (c.arrival_s > span) continue;
      }
      out.push_back(std::move(c));
    }
  }
  if (stagger) {
    std::stable_sort(out.begin(), out.end(),
                     [](const WorkloadRequest& a, const WorkloadRequest& b) { return a.arrival_s < b.arrival_s; });
    if (out.size() > cap) out.resize(cap);
    for (size_t i = 0; i < out.size(); ++i) out[i].index = static_cast<int64_t>(i);
  }
  return out;
}

std::vector<int32_t> WorkloadTokens(const WorkloadRequest& request, int32_t first_id, int32_t end_id) {
  const uint64_t range = static_cast<uint64_t>(end_id - first_id);
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(0, request.prompt_tokens)));
  auto fill = [&](uint64_t seed, int64_t count) {
    for (int64_t i = 0; i < count && static_cast<int64_t>(out.size()) < request.prompt_tokens; ++i) {
      out.push_back(first_id + static_cast<int32_t>(SplitMix64(seed + static_cast<uint64_t>(i)) % range));
    }
  };
  for (int64_t id : request.blocks) fill(SplitMix64(static_cast<uint64_t>(id)), request.block_tokens);
  // Past the blocks: ids of this request alone (a domain apart from block ids).
  fill(SplitMix64(~static_cast<uint64_t>(request.index) ^ 0x5DEECE66Dull), request.prompt_tokens);
  return out;
}

HitCeiling PrefixHitCeiling(const std::vector<WorkloadRequest>& workload, int unit_tokens) {
  // Every earlier prompt counts: each was ready before anything arrived.
  return CausalHitCeiling(workload, std::vector<double>(workload.size(), -std::numeric_limits<double>::infinity()),
                          unit_tokens);
}

HitCeiling CausalHitCeiling(const std::vector<WorkloadRequest>& workload, const std::vector<double>& ready_s,
                            int unit_tokens) {
  const int64_t unit = std::max(1, unit_tokens);
  // Per block: the earliest time a whole copy of it was ready, and the partial copies (a prompt's
  // last block), few, as (tokens, ready).
  struct Held {
    double full_ready = std::numeric_limits<double>::infinity();
    std::vector<std::pair<int64_t, double>> partial;
  };
  std::unordered_map<int64_t, Held> held;
  HitCeiling c;
  for (size_t i = 0; i < workload.size(); ++i) {
    const WorkloadRequest& w = workload[i];
    const int64_t bt = w.block_tokens;
    int64_t hit = 0;
    for (size_t j = 0; j < w.blocks.size(); ++j) {
      const int64_t own = std::min<int64_t>(bt, w.prompt_tokens - static_cast<int64_t>(j) * bt);
      if (own <= 0) break;
      auto it = held.find(w.blocks[j]);
      int64_t had = 0;
      if (it != held.end()) {
        if (it->second.full_ready <= w.arrival_s) had = bt;
        for (const auto& [tokens, ready] : it->second.partial) {
          if (ready <= w.arrival_s) had = std::max(had, tokens);
        }
      }
      hit += std::min(had, own);
      if (had < bt) break;
    }
    hit = std::min(hit, (w.prompt_tokens - 1) / unit * unit);
    for (size_t j = 0; j < w.blocks.size(); ++j) {
      const int64_t own = std::min<int64_t>(bt, w.prompt_tokens - static_cast<int64_t>(j) * bt);
      if (own <= 0) break;
      Held& h = held[w.blocks[j]];
      if (own == bt) {
        h.full_ready = std::min(h.full_ready, ready_s[i]);
      } else {
        h.partial.emplace_back(own, ready_s[i]);
      }
    }
    c.prompt_tokens += w.prompt_tokens;
    c.hit_tokens += hit;
  }
  return c;
}

}  // namespace ds41
