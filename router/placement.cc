#include "router/placement.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace ds41 {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Index of the cheapest candidate; `tie` is set when a near tie was broken at random.
int ChooseCheapest(const std::vector<double>& costs, const CostModel& cm, std::mt19937_64& rng, bool* tie) {
  *tie = false;
  double best = kInf;
  for (double c : costs) best = std::min(best, c);
  if (!(best < kInf)) return -1;
  const double margin = std::max(best * cm.tie_fraction, cm.tie_floor_s);
  std::vector<int> near;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (costs[i] <= best + margin) near.push_back(static_cast<int>(i));
  }
  if (near.size() == 1) return near[0];
  *tie = true;
  return near[std::uniform_int_distribution<size_t>(0, near.size() - 1)(rng)];
}

// The smallest `key` among feasible candidates, ties drawn at random.
int ChooseMin(const std::vector<double>& costs, const std::function<double(size_t)>& key, std::mt19937_64& rng) {
  std::vector<int> best;
  double best_key = kInf;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (!(costs[i] < kInf)) continue;
    const double k = key(i);
    if (best.empty() || k < best_key) {
      best.assign(1, static_cast<int>(i));
      best_key = k;
    } else if (k == best_key) {
      best.push_back(static_cast<int>(i));
    }
  }
  if (best.size() <= 1) return best.empty() ? -1 : best[0];
  return best[std::uniform_int_distribution<size_t>(0, best.size() - 1)(rng)];
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t HashString(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then mixed
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return Mix(h);
}

// Requests a node holds (the balance check's unit in both pools).
int64_t Requests(const NodeLoad& n) { return n.running + n.waiting; }

}  // namespace

const char* PlacementPolicyName(PlacementPolicy p) {
  switch (p) {
    case PlacementPolicy::kCost: return "cost";
    case PlacementPolicy::kRoundRobin: return "round_robin";
    case PlacementPolicy::kRandom: return "random";
    case PlacementPolicy::kLeastLoaded: return "least_loaded";
    case PlacementPolicy::kSticky: return "sticky";
    case PlacementPolicy::kPrefixAffinity: return "prefix_affinity";
  }
  return "unknown";
}

std::optional<PlacementPolicy> ParsePlacementPolicy(std::string_view name) {
  for (PlacementPolicy p : kPlacementPolicies) {
    if (name == PlacementPolicyName(p)) return p;
  }
  return std::nullopt;
}

struct Placer::Pool {
  explicit Pool(int64_t capacity_units) : affinity(capacity_units) {}
  size_t next = 0;  // round-robin position
  PrefixAffinityIndex affinity;
};

Placer::Placer(PlacerOptions options)
    : opt_(std::move(options)),
      cost_(opt_.cost),
      rng_(opt_.seed ? opt_.seed : std::random_device{}()),
      decoders_(std::make_unique<Pool>(opt_.affinity.capacity_units)),
      encoders_(std::make_unique<Pool>(opt_.affinity.capacity_units)) {}

Placer::~Placer() = default;

CostModel Placer::cost() const {
  MutexLock l(&mu_);
  return cost_;
}

void Placer::LearnEncoderRate(const Placement& p, int64_t computed_tokens, double ttft_seconds) {
  if (!p.encoder_idle || computed_tokens < 64 || ttft_seconds <= 0) return;
  const double observed = static_cast<double>(computed_tokens) / ttft_seconds;
  MutexLock l(&mu_);
  cost_.encoder_tokens_per_s = 0.8 * cost_.encoder_tokens_per_s + 0.2 * observed;
}

int Placer::Choose(Pool& pool, const std::vector<double>& costs, const std::vector<NodeLoad>& nodes, bool decoders,
                   const PlacementInput& in, std::string* reason) {
  // Decoders are loaded by the sequences they hold, encoders by the prompt tokens queued on them.
  auto load = [&](size_t i) {
    return static_cast<double>(decoders ? Requests(nodes[i]) : nodes[i].queued_tokens);
  };
  auto least_loaded = [&]() DS41_REQUIRES(mu_) { return ChooseMin(costs, load, rng_); };
  *reason = PlacementPolicyName(opt_.policy);
  switch (opt_.policy) {
    case PlacementPolicy::kCost: {
      bool tie = false;
      const int i = ChooseCheapest(costs, cost_, rng_, &tie);
      *reason = tie ? "tie_break" : "least_cost";
      return i;
    }
    case PlacementPolicy::kRoundRobin:
      for (size_t k = 0; k < nodes.size(); ++k) {
        const size_t i = (pool.next + k) % nodes.size();
        if (costs[i] < kInf) {
          pool.next = i + 1;
          return static_cast<int>(i);
        }
      }
      return -1;
    case PlacementPolicy::kRandom:
      return ChooseMin(costs, [](size_t) { return 0.0; }, rng_);
    case PlacementPolicy::kLeastLoaded:
      return least_loaded();
    case PlacementPolicy::kSticky: {
      if (in.session.empty()) return ChooseMin(costs, [](size_t) { return 0.0; }, rng_);
      // Rendezvous hashing: the session keeps its node while that node stays, and only the
      // sessions of a node that leaves move.
      const uint64_t s = HashString(in.session);
      return ChooseMin(costs, [&](size_t i) { return -static_cast<double>(Mix(s ^ HashString(nodes[i].address)) >> 11); },
                       rng_);
    }
    case PlacementPolicy::kPrefixAffinity: {
      // The nodes that can take the request: their load spread, then their longest match, searched
      // once for all of them.
      int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
      std::vector<const std::string*> eligible;
      std::vector<size_t> index;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (!(costs[i] < kInf)) continue;
        lo = std::min(lo, Requests(nodes[i]));
        hi = std::max(hi, Requests(nodes[i]));
        eligible.push_back(&nodes[i].address);
        index.push_back(i);
      }
      if (hi - lo > opt_.affinity.balance_abs && static_cast<double>(hi) > opt_.affinity.balance_rel * static_cast<double>(lo)) {
        *reason = "prefix_balance";
        return least_loaded();
      }
      std::vector<char> at_best;
      const int64_t best = pool.affinity.Best(eligible, in.prefix_chain, &at_best);
      if (best > 0 && static_cast<double>(best) >= opt_.affinity.match_fraction * static_cast<double>(in.prefix_chain.size())) {
        *reason = "prefix_match";
        std::vector<char> matched(nodes.size(), 0);
        for (size_t k = 0; k < index.size(); ++k) matched[index[k]] = at_best[k];
        // Among the longest matches, the least loaded.
        return ChooseMin(costs, [&](size_t i) { return matched[i] ? load(i) : kInf; }, rng_);
      }
      *reason = "prefix_miss";
      return least_loaded();
    }
  }
  return -1;
}

Placement Placer::Place(const PlacementInput& in, const std::vector<NodeLoad>& decoders, const std::vector<NodeLoad>& encoders) {
  MutexLock l(&mu_);
  const CostModel& cm = cost_;
  Placement p;
  const int64_t uncached = std::max<int64_t>(0, in.prompt_tokens - in.cached_tokens);
  const int64_t decoder_replay = std::min<int64_t>(in.window, in.prompt_tokens);
  p.encoder_tokens = uncached;
  p.replay_tokens = (in.cached_tokens > 0 && !in.swa_available) ? std::min<int64_t>(in.window, in.cached_tokens) : 0;

  // Decoder: its queue (steps until a slot frees, plus the sequences admitted ahead), the prefix it
  // must fetch unless warm, and its replay. A decoder at its running limit is infeasible.
  std::vector<double> dcost(decoders.size(), kInf);
  for (size_t i = 0; i < decoders.size(); ++i) {
    const NodeLoad& d = decoders[i];
    if (d.running + d.waiting >= cm.max_batch) continue;
    const double kv = d.warm ? 0.0 : static_cast<double>(in.cached_tokens) * cm.kv_bytes_per_token;
    const double batch_slowdown = 1.0 + static_cast<double>(d.running) / cm.max_batch;
    // The steps of the sequences admitted ahead, then its own first step in the batch it joins.
    dcost[i] = kv / cm.kv_bytes_per_s + static_cast<double>(decoder_replay) / cm.decoder_replay_tokens_per_s * batch_slowdown +
               static_cast<double>(d.waiting) * cm.DecodeStep(d.running) + cm.DecodeStep(d.running + 1);
  }
  std::string reason;
  const int di = Choose(*decoders_, dcost, decoders, /*decoders=*/true, in, &reason);
  if (di < 0) {
    p.reason = "no_capacity";
    return p;
  }
  const NodeLoad& dec = decoders[di];
  p.decoder = dec.address;
  p.queue_seconds = static_cast<double>(dec.waiting) * cm.DecodeStep(dec.running);
  p.kv_bytes = dec.warm ? 0.0 : static_cast<double>(in.cached_tokens) * cm.kv_bytes_per_token;
  p.reason = reason;
  if (opt_.policy == PlacementPolicy::kCost) {
    if (dec.warm) {
      p.reason = "warm_session";
    } else if (decoders.size() == 1) {
      p.reason = "only_candidate";
    }
  }

  // Encoder: its queue plus this request's uncached tokens and replay. Not needed when N == H.
  double ecost_chosen = 0;
  if (uncached > 0 && !encoders.empty()) {
    std::vector<double> ecost(encoders.size());
    for (size_t i = 0; i < encoders.size(); ++i) {
      ecost[i] = static_cast<double>(encoders[i].queued_tokens + uncached) / cm.encoder_tokens_per_s +
                 static_cast<double>(p.replay_tokens) / cm.encoder_replay_tokens_per_s;
    }
    std::string encoder_reason;
    const int ei = Choose(*encoders_, ecost, encoders, /*decoders=*/false, in, &encoder_reason);
    p.encoder = encoders[ei].address;
    p.encoder_idle = encoders[ei].queued_tokens == 0 && encoders[ei].running + encoders[ei].waiting == 0;
    ecost_chosen = ecost[ei];
    p.queue_seconds += static_cast<double>(encoders[ei].queued_tokens) / cm.encoder_tokens_per_s;
  }
  p.predicted_seconds = dcost[di] + ecost_chosen;
  return p;
}

void Placer::Served(const PlacementInput& in, const Placement& p) {
  if (opt_.policy != PlacementPolicy::kPrefixAffinity || in.prefix_chain.empty()) return;
  MutexLock l(&mu_);
  if (!p.decoder.empty()) decoders_->affinity.Record(p.decoder, in.prefix_chain);
  if (!p.encoder.empty()) encoders_->affinity.Record(p.encoder, in.prefix_chain);
}

}  // namespace ds41
