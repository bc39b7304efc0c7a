// SimRouter: the router's decision for one request, made by the router's own code (ds41_placement):
// DecideAttempt (router/attempt.h, RouterCore::PlaceAttempt's decision: SWA peer, Placer::Place,
// and the deadline and queue refusals), the same Placer, InflightLoads and PredictionScale objects,
// SessionBindings and DecoderWarmAt for the marks — over node loads as the router sees them:
// the last poll's snapshot (every poll interval) adjusted by InflightLoads. Only the plumbing
// is the simulator's: snapshots instead of Status RPCs, a WarmDirectory instead of the polled
// session lists, node indices beside the addresses. Each Placer::Place call is timed.
// Not thread-safe (the objects it drives are, but the simulation runs on one thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "router/attempt.h"
#include "router/inflight_loads.h"
#include "router/placement.h"
#include "router/prediction_scale.h"
#include "router/session_bindings.h"
#include "sim/warm_directory.h"

namespace ds41::sim {

struct SimRouterOptions {
  PlacerOptions placer;
  int unit_tokens = 64;
  int window = 128;
  size_t max_sessions = 100000;  // RouterOptions::max_sessions
  double max_queue_seconds = 8;  // RouterOptions::max_queue_seconds (the router's default; 0: no shedding)
};

struct RouteDecision {
  Placement placement;
  AttemptRefusal refusal = AttemptRefusal::kNone;  // the router's refusal (decoder -1), with its message
  std::string message;
  int retry_after_s = 0;
  int decoder = -1, encoder = -1;  // node indices (-1: none)
  std::string swa_peer;            // the node named as holding the SWA state at H ("" none)
  int swa_peer_decoder = -1, swa_peer_encoder = -1;
  double place_seconds = 0;        // wall time of the Placer::Place call
  double attempt_seconds = 0;      // of the whole DecideAttempt (Place, then Served on success)
};

class SimRouter {
 public:
  SimRouter(SimRouterOptions options, int decoders, int encoders, WarmDirectory* warm);

  static std::string DecoderName(int i) { return "d" + std::to_string(i); }
  static std::string EncoderName(int i) { return "e" + std::to_string(i); }

  // A poll round: fill each node's load as its Status reports it now (address and warm untouched).
  NodeLoad& polled_decoder(int i) { return polled_dec_[static_cast<size_t>(i)]; }
  NodeLoad& polled_encoder(int i) { return polled_enc_[static_cast<size_t>(i)]; }
  void Polled(double t) { poll_t_ = t; }
  // Simulated seconds on the clock InflightLoads and NodeLoad::polled_at use.
  static InflightLoads::Clock::time_point At(double t) {
    return InflightLoads::Clock::time_point(std::chrono::duration_cast<InflightLoads::Clock::duration>(std::chrono::duration<double>(t)));
  }

  // RouterCore::PlaceAttempt for a new request: candidates at H, marks, in-flight loads, then
  // DecideAttempt. `chain` (prefix affinity only) is the prompt's unit chain; `seconds_left` the
  // time to the request's deadline.
  RouteDecision Route(const std::string& session, int64_t session_id, int64_t prompt_tokens, int64_t cached_tokens,
                      std::vector<uint64_t> chain, double seconds_left);

  Placer& placer() { return placer_; }
  InflightLoads& inflight() { return inflight_; }
  SessionBindings& bindings() { return bindings_; }
  PredictionScale& prediction_scale() { return prediction_scale_; }  // fed each first token, as the router does

 private:
  const SimRouterOptions opt_;
  WarmDirectory* warm_;
  Placer placer_;
  InflightLoads inflight_;
  SessionBindings bindings_;
  PredictionScale prediction_scale_;
  double poll_t_ = 0;
  std::vector<NodeLoad> polled_dec_, polled_enc_;  // the last poll
  std::vector<NodeLoad> dec_, enc_;                // this request's candidates
  std::vector<int64_t> held_;                      // per decoder: session length held at the poll (-1)
};

// "d12" -> 12 for prefix 'd'; -1 when `name` is not of that form.
int NodeIndex(const std::string& name, char prefix);

}  // namespace ds41::sim
