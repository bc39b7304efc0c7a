// Placement (SERVING.md §5): chooses a decoder and an encoder for one request. Every candidate's
// cost is predicted seconds to the first token; the policy then picks. The cost model (the default)
// picks the cheapest: the decoder first (a warm session saves moving its whole prefix), then the
// encoder (load only: the prefix it needs comes from the store at 890 B/token wherever it runs), with
// near ties drawn at random so a hot prefix does not pile onto one node. The baselines (round-robin,
// random, least-loaded, session-sticky, per-node prefix affinity) pick by their own rule over the
// same feasible candidates, so one code path serves every policy and only the choice differs.
// No I/O: the router and the simulator (sim/) call the same code.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "router/prefix_affinity.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

enum class PlacementPolicy { kCost, kRoundRobin, kRandom, kLeastLoaded, kSticky, kPrefixAffinity };
inline constexpr PlacementPolicy kPlacementPolicies[] = {
    PlacementPolicy::kCost,        PlacementPolicy::kRoundRobin, PlacementPolicy::kRandom,
    PlacementPolicy::kLeastLoaded, PlacementPolicy::kSticky,     PlacementPolicy::kPrefixAffinity};
// "cost", "round_robin", "random", "least_loaded", "sticky", "prefix_affinity".
const char* PlacementPolicyName(PlacementPolicy p);
std::optional<PlacementPolicy> ParsePlacementPolicy(std::string_view name);

// What the router knows of one node at decision time.
struct NodeLoad {
  std::string address;
  int64_t queued_tokens = 0;   // prompt tokens waiting on an encoder
  int64_t running = 0;         // sequences decoding (decoders) or prefilling (encoders)
  int64_t waiting = 0;         // admitted, not yet running
  uint64_t resident_bytes = 0;
  bool warm = false;           // decoder: holds this session's KV in RAM
  // When the node reported the counts above (steady clock; none: not from a poll). Work this
  // router saw finish since then is taken off them (InflightLoads::Apply).
  std::optional<std::chrono::steady_clock::time_point> polled_at;
};

// Rates the costs are computed with; the router refines them from observed requests.
struct CostModel {
  double encoder_tokens_per_s = 4000;      // encoder layers over uncached tokens
  double encoder_replay_tokens_per_s = 8000;
  double decoder_replay_tokens_per_s = 4000;
  // One batched decode step of r sequences: decode_step_s + decode_step_seq_s * r.
  double decode_step_s = 0.02;
  double decode_step_seq_s = 0.02 / 64;
  double kv_bytes_per_s = 1e9;             // store -> decoder transfer
  double kv_bytes_per_token = 890;         // the unit format's payload per token
  int max_batch = 64;                      // a decoder's running limit (memory feasibility)

  double DecodeStep(int64_t sequences) const { return decode_step_s + decode_step_seq_s * static_cast<double>(sequences); }
  double tie_fraction = 0.05;              // near tie: within 5% of the best ...
  double tie_floor_s = 0.002;              // ... or within 2 ms
};

struct PlacementInput {
  int64_t prompt_tokens = 0;   // N
  int64_t cached_tokens = 0;   // H from the store lookup
  int window = 128;            // replay span
  bool swa_available = false;  // someone holds the SWA state at H (or H == 0)
  std::string session;         // session-sticky hashes it ("" : drawn at random)
  std::vector<uint64_t> prefix_chain;  // PrefixChain(prompt): prefix affinity matches it
};

struct Placement {
  std::string decoder, encoder;
  // cost: warm_session | least_cost | tie_break | only_candidate; baselines: their policy's name,
  // prefix affinity: prefix_match | prefix_miss | prefix_balance; any: no_capacity.
  std::string reason;
  double predicted_seconds = 0;  // the cost model's prediction for the chosen pair, whatever the policy
  double queue_seconds = 0;      // of it, the wait behind work already on those nodes (overload shedding)
  int64_t encoder_tokens = 0;    // N - H
  int64_t replay_tokens = 0;     // encoder replay (0 or window)
  double kv_bytes = 0;           // prefix bytes the decoder fetches from the store
  bool encoder_idle = false;     // the chosen encoder had nothing queued: its TTFT measures its rate
};

// Prefix affinity as SGLang's cache-aware router does it: a node that served at least
// `match_fraction` of the prompt's prefix is chosen, else the least loaded; when the pool's loads
// drift apart (max - min > abs and max > rel * min, in requests) the least loaded wins outright.
struct AffinityOptions {
  double match_fraction = 0.5;
  int64_t balance_abs = 32;
  double balance_rel = 1.5;
  int64_t capacity_units = 1 << 16;  // prefix units remembered per node (its cache, as far as the router knows)
};

struct PlacerOptions {
  PlacementPolicy policy = PlacementPolicy::kCost;
  CostModel cost;
  AffinityOptions affinity;
  uint64_t seed = 0;  // 0: from std::random_device
};

// Thread-safe: one mutex guards the random draw, the round-robin positions, the learned rate and
// the affinity index; Place is O(candidates + prefix units).
class Placer {
 public:
  explicit Placer(PlacerOptions options);
  ~Placer();

  // Returns reason "no_capacity" with empty addresses when no decoder has room. Nodes that failed
  // this request are left out of the lists by the caller.
  Placement Place(const PlacementInput& in, const std::vector<NodeLoad>& decoders, const std::vector<NodeLoad>& encoders);
  // The request was sent as placed: prefix affinity remembers which nodes served its prefix.
  void Served(const PlacementInput& in, const Placement& p);
  // The encoder rate follows what requests show: computed tokens over the time to the first token,
  // from requests placed on an idle encoder only. Under load a TTFT is mostly queueing, and learning
  // from it would shrink the rate, inflate every prediction and refuse requests on their deadlines.
  void LearnEncoderRate(const Placement& p, int64_t computed_tokens, double ttft_seconds);

  PlacementPolicy policy() const { return opt_.policy; }
  CostModel cost() const;

 private:
  struct Pool;  // per role: round-robin position and affinity index
  int Choose(Pool& pool, const std::vector<double>& costs, const std::vector<NodeLoad>& nodes, bool decoders,
             const PlacementInput& in, std::string* reason) DS41_REQUIRES(mu_);

  const PlacerOptions opt_;
  mutable Mutex mu_;
  CostModel cost_ DS41_GUARDED_BY(mu_);
  std::mt19937_64 rng_ DS41_GUARDED_BY(mu_);
  std::unique_ptr<Pool> decoders_ DS41_GUARDED_BY(mu_), encoders_ DS41_GUARDED_BY(mu_);
};

}  // namespace ds41
