// Placement (SERVING.md §5): every term is predicted seconds to the first token. The decoder is
// chosen first (a warm session saves moving its whole prefix), then the encoder (load only: the
// prefix it needs comes from the store at 890 B/token wherever it runs). Candidates within a small
// margin of the best are near-ties and one is drawn at random, so a hot prefix does not pile onto
// one node. Pure: no I/O, so the arithmetic is tested on its own. Thread-compatible: the caller
// serializes the random generator it passes in.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ds41 {

// What the router knows of one node at decision time.
struct NodeLoad {
  std::string address;
  int64_t queued_tokens = 0;   // prompt tokens waiting on an encoder
  int64_t running = 0;         // sequences decoding (decoders) or prefilling (encoders)
  int64_t waiting = 0;         // admitted, not yet running
  uint64_t resident_bytes = 0;
  bool warm = false;           // decoder: holds this session's KV in RAM
};

// Rates the costs are computed with; the router refines them from observed requests.
struct CostModel {
  double encoder_tokens_per_s = 4000;      // encoder layers over uncached tokens
  double encoder_replay_tokens_per_s = 8000;
  double decoder_replay_tokens_per_s = 4000;
  double decode_step_s = 0.02;             // one batched decode step
  double kv_bytes_per_s = 1e9;             // store -> decoder transfer
  double kv_bytes_per_token = 890;         // the unit format's payload per token
  int max_batch = 64;                      // a decoder's running limit (memory feasibility)
  double tie_fraction = 0.05;              // near tie: within 5% of the best ...
  double tie_floor_s = 0.002;              // ... or within 2 ms
};

struct PlacementInput {
  int64_t prompt_tokens = 0;   // N
  int64_t cached_tokens = 0;   // H from the store lookup
  int window = 128;            // replay span
  bool swa_available = false;  // someone holds the SWA state at H (or H == 0)
};

struct Placement {
  std::string decoder, encoder;
  std::string reason;          // warm_session | least_cost | tie_break | only_candidate | no_capacity
  double predicted_seconds = 0;
  int64_t encoder_tokens = 0;  // N - H
  int64_t replay_tokens = 0;   // encoder replay (0 or window)
  double kv_bytes = 0;         // prefix bytes the decoder fetches from the store
};

// Chooses a decoder and an encoder, or returns reason "no_capacity" with empty addresses when no
// decoder has room. Nodes that failed this request are left out of the lists by the caller.
Placement Place(const PlacementInput& in, const std::vector<NodeLoad>& decoders, const std::vector<NodeLoad>& encoders,
                const CostModel& cost, std::mt19937_64& rng);

}  // namespace ds41
