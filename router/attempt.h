// One placement attempt, decided: the router's (RouterCore::PlaceAttempt) and the simulator's
// (sim/sim_router.h) are this one function, so that what the simulator reports is what the router
// would have done. It names the SWA peer, places the request over candidates already adjusted by
// InflightLoads, and applies the refusals that follow from the prediction: no decoder with room, a
// first token predicted past the request's deadline, and (for a new request only) a predicted wait
// behind queued work over max_queue_seconds. No I/O; the caller says how long is left.
// Thread-compatible; the Placer is the caller's (and locked by it, as Placer::Place requires).
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "router/placement.h"
#include "router/prediction_scale.h"

namespace ds41 {

struct AttemptInput {
  int64_t prompt_tokens = 0, cached_tokens = 0;
  int window = 128;
  std::string session;
  std::vector<uint64_t> prefix_chain;    // prefix affinity only
  std::string bound, warm_holder;        // the candidates' marks: who holds the session's SWA state at H
  // The first attempt's encoder, named as the SWA peer of a migration when no holder is left; "" none.
  std::string swa_fallback;
  const std::set<std::string>* excluded = nullptr;  // nodes this request already failed on (null: none)
  double seconds_left = std::numeric_limits<double>::infinity();  // until the request's deadline
  bool first_attempt = true;             // not a retry or a migration: queue shedding applies
  double max_queue_seconds = 0;          // RouterOptions::max_queue_seconds (0: no shedding)
  // Observed over predicted TTFT (PredictionScale::Scale), read only to judge a queue wait; null: 1.
  const PredictionScale* prediction_scale = nullptr;
};

enum class AttemptRefusal { kNone, kDecodersFull, kDeadline, kQueue };
const char* AttemptRefusalName(AttemptRefusal r);  // the metrics' rejection reason ("decoders_full", ...)

struct AttemptDecision {
  Placement placement;
  std::string swa_peer;
  AttemptRefusal refusal = AttemptRefusal::kNone;
  double queue_wait_s = 0;               // the scaled wait judged against max_queue_seconds
  int retry_after_s = 0;                 // kQueue: the predicted excess, 1..60 s
  std::string message;                   // why it was refused, for the client
  double place_s = 0;                    // wall time of the Placer::Place call (the decision itself)
};

// REQUIRES: `decoders` is not empty (no healthy node is the caller's refusal). On kNone the
// placement has been counted served (Placer::Served); the caller counts it started
// (InflightLoads::Started) once it commits to it.
AttemptDecision DecideAttempt(AttemptInput in, const std::vector<NodeLoad>& decoders, const std::vector<NodeLoad>& encoders,
                              Placer* placer);

}  // namespace ds41
