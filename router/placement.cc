#include "router/placement.h"

#include <algorithm>
#include <limits>

namespace ds41 {
namespace {

// Index of the chosen candidate among costs; `tie` is set when a near tie was broken at random.
int ChooseCheapest(const std::vector<double>& costs, const CostModel& cm, std::mt19937_64& rng, bool* tie) {
  *tie = false;
  double best = std::numeric_limits<double>::infinity();
  for (double c : costs) best = std::min(best, c);
  if (!(best < std::numeric_limits<double>::infinity())) return -1;
  const double margin = std::max(best * cm.tie_fraction, cm.tie_floor_s);
  std::vector<int> near;
  for (size_t i = 0; i < costs.size(); ++i) {
    if (costs[i] <= best + margin) near.push_back(static_cast<int>(i));
  }
  if (near.size() == 1) return near[0];
  *tie = true;
  return near[std::uniform_int_distribution<size_t>(0, near.size() - 1)(rng)];
}

}  // namespace

Placement Place(const PlacementInput& in, const std::vector<NodeLoad>& decoders, const std::vector<NodeLoad>& encoders,
                const CostModel& cm, std::mt19937_64& rng) {
  Placement p;
  const int64_t uncached = std::max<int64_t>(0, in.prompt_tokens - in.cached_tokens);
  const int64_t decoder_replay = std::min<int64_t>(in.window, in.prompt_tokens);
  p.encoder_tokens = uncached;
  p.replay_tokens = (in.cached_tokens > 0 && !in.swa_available) ? std::min<int64_t>(in.window, in.cached_tokens) : 0;

  // Decoder: its queue (steps until a slot frees, plus the sequences admitted ahead), the prefix it
  // must fetch unless warm, and its replay. A decoder at its running limit is infeasible.
  std::vector<double> dcost(decoders.size(), std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < decoders.size(); ++i) {
    const NodeLoad& d = decoders[i];
    if (d.running + d.waiting >= cm.max_batch) continue;
    const double kv = d.warm ? 0.0 : static_cast<double>(in.cached_tokens) * cm.kv_bytes_per_token;
    const double batch_slowdown = 1.0 + static_cast<double>(d.running) / cm.max_batch;
    dcost[i] = kv / cm.kv_bytes_per_s + static_cast<double>(decoder_replay) / cm.decoder_replay_tokens_per_s * batch_slowdown +
               static_cast<double>(d.waiting) * cm.decode_step_s + cm.decode_step_s * batch_slowdown;
  }
  bool dtie = false;
  const int di = ChooseCheapest(dcost, cm, rng, &dtie);
  if (di < 0) {
    p.reason = "no_capacity";
    return p;
  }
  const NodeLoad& dec = decoders[di];
  p.decoder = dec.address;
  p.kv_bytes = dec.warm ? 0.0 : static_cast<double>(in.cached_tokens) * cm.kv_bytes_per_token;

  // Encoder: its queue plus this request's uncached tokens and replay. Not needed when N == H.
  double ecost_best = 0;
  bool etie = false;
  if (uncached > 0 && !encoders.empty()) {
    std::vector<double> ecost(encoders.size());
    for (size_t i = 0; i < encoders.size(); ++i) {
      const NodeLoad& e = encoders[i];
      ecost[i] = static_cast<double>(e.queued_tokens + uncached) / cm.encoder_tokens_per_s +
                 static_cast<double>(p.replay_tokens) / cm.encoder_replay_tokens_per_s;
    }
    const int ei = ChooseCheapest(ecost, cm, rng, &etie);
    p.encoder = encoders[ei].address;
    ecost_best = ecost[ei];
  }
  p.predicted_seconds = dcost[di] + ecost_best;
  if (dec.warm) {
    p.reason = "warm_session";
  } else if (decoders.size() == 1) {
    p.reason = "only_candidate";
  } else if (dtie) {
    p.reason = "tie_break";
  } else {
    p.reason = "least_cost";
  }
  return p;
}

}  // namespace ds41
