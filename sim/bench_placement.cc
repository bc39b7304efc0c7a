#include "sim/bench_placement.h"

#include <chrono>
#include <map>
#include <random>

#include "router/inflight_loads.h"
#include "trace/summary.h"

namespace ds41::sim {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

StatusOr<std::vector<BenchPlacementResult>> BenchPlacement(const BenchPlacementSpec& spec, std::ostream& os) {
  if (spec.decoders < 1 || spec.encoders < 1 || spec.units < 1 || spec.samples < 1 || spec.conversations < 1 ||
      spec.unit_tokens < 1 || spec.warmup < 0 || spec.inflight_nodes < 0)
    return InvalidArgumentError("bench-placement: counts must be positive");
  std::mt19937_64 rng(spec.seed);
  std::vector<NodeLoad> decoders(static_cast<size_t>(spec.decoders)), encoders(static_cast<size_t>(spec.encoders));
  for (size_t i = 0; i < decoders.size(); ++i) {
    NodeLoad& d = decoders[i];
    d.address = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":7600";
    // Loads within prefix affinity's balance band (PlacerOptions::affinity: a spread of 32
    // requests), so that every policy takes its real path and none its balance shortcut.
    d.running = std::uniform_int_distribution<int64_t>(20, 44)(rng);
    d.waiting = std::uniform_int_distribution<int64_t>(0, 3)(rng);
    d.resident_bytes = std::uniform_int_distribution<uint64_t>(0, 8ull << 30)(rng);
  }
  for (size_t i = 0; i < encoders.size(); ++i) {
    NodeLoad& e = encoders[i];
    e.address = "10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":7500";
    e.queued_tokens = std::uniform_int_distribution<int64_t>(0, 50000)(rng);
    e.running = std::uniform_int_distribution<int64_t>(0, 8)(rng);
  }
  // Conversations: long chains; a prompt is a conversation's first k units plus its own.
  std::vector<std::vector<uint64_t>> convs(static_cast<size_t>(spec.conversations));
  for (auto& c : convs) {
    c.resize(static_cast<size_t>(spec.units * 5 / 3 + 1));
    for (uint64_t& h : c) h = rng();
  }
  auto prompt = [&](PlacementInput* in) {
    const auto& c = convs[std::uniform_int_distribution<size_t>(0, convs.size() - 1)(rng)];
    const int64_t units = std::uniform_int_distribution<int64_t>(std::max(1, spec.units / 3), spec.units * 5 / 3)(rng);
    const int64_t shared = std::uniform_int_distribution<int64_t>(0, units)(rng);
    in->prefix_chain.assign(c.begin(), c.begin() + shared);
    for (int64_t u = shared; u < units; ++u) in->prefix_chain.push_back(rng());
    in->prompt_tokens = units * spec.unit_tokens + 1;
    in->cached_tokens = shared * spec.unit_tokens;
    in->swa_available = rng() % 2;
    in->session = "s" + std::to_string(rng() % 100000);
  };

  std::vector<BenchPlacementResult> out;
  std::vector<PlacementPolicy> policies = spec.policies;
  if (policies.empty()) policies.assign(std::begin(kPlacementPolicies), std::end(kPlacementPolicies));
  os << "placement over " << spec.decoders << " decoders and " << spec.encoders << " encoders, prompts of "
     << spec.units / 3 << ".." << spec.units * 5 / 3 << " units, " << spec.samples << " calls per policy:\n";
  for (PlacementPolicy policy : policies) {
    PlacerOptions po;
    po.policy = policy;
    po.seed = spec.seed;
    Placer placer(po);
    InflightLoads inflight;
    // In-flight work on some nodes, as a busy router has.
    for (int k = 0; k < spec.inflight_nodes; ++k) {
      Placement p;
      p.decoder = decoders[static_cast<size_t>(k) % decoders.size()].address;
      p.encoder = encoders[static_cast<size_t>(k) % encoders.size()].address;
      p.encoder_tokens = 4096;
      inflight.Started(p);
    }
    PlacementInput in;
    for (int k = 0; k < spec.warmup; ++k) {
      prompt(&in);
      const Placement p = placer.Place(in, decoders, encoders);
      placer.Served(in, p);
    }
    std::map<std::string, int> reasons;  // what the calls did: a policy's shortcut shows here
    std::vector<double> place, total;
    place.reserve(static_cast<size_t>(spec.samples));
    total.reserve(static_cast<size_t>(spec.samples));
    std::vector<NodeLoad> dec, enc;
    for (int k = 0; k < spec.samples; ++k) {
      prompt(&in);
      dec = decoders;
      enc = encoders;
      // A few decoders warm for this session, as the polls would show.
      for (int w = 0; w < 2; ++w) dec[std::uniform_int_distribution<size_t>(0, dec.size() - 1)(rng)].warm = true;
      const auto t0 = Clock::now();
      inflight.Apply(&dec, &enc);
      const auto t1 = Clock::now();
      const Placement p = placer.Place(in, dec, enc);
      place.push_back(Since(t1));
      total.push_back(Since(t0));
      ++reasons[p.reason];
      placer.Served(in, p);
    }
    BenchPlacementResult r;
    r.policy = policy;
    r.p50_s = Percentile(place, 50);
    r.p99_s = Percentile(place, 99);
    r.max_s = Percentile(place, 100);
    r.with_inflight_p99_s = Percentile(total, 99);
    char line[200];
    std::snprintf(line, sizeof(line), "  %-16s Place p50 %7.1f us, p99 %7.1f us, max %8.1f us; with in-flight counts p99 %7.1f us\n",
                  PlacementPolicyName(policy), 1e6 * r.p50_s, 1e6 * r.p99_s, 1e6 * r.max_s, 1e6 * r.with_inflight_p99_s);
    os << line << "    reasons:";
    for (const auto& [reason, n] : reasons) os << " " << reason << " " << n;
    os << "\n";
    out.push_back(r);
  }
  return out;
}

}  // namespace ds41::sim
