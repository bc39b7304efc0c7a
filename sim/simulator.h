// Simulate: plays a workload (trace/workload.h) on a modelled cluster and returns what a replay
// against a real one records (trace/request_record.h), so both print the same summary. The path of
// a request is RouterCore::Generate's: a client slot (--concurrency, --deadline as the replay has),
// a router worker, the fixed request overhead, the store lookup of H, the router's real placement
// (sim_router.h), the decoder's admission (warm session or prefix fetch), the encoder's prefix load,
// SWA restore or replay and shared steps, the KV handoff, the decoder replay and the first token,
// continuous batching to the last token, the generated units' write and the stream's end.
// Deterministic for a given seed. Not thread-safe; one call runs one simulation.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "router/placement.h"
#include "router/rate_profile.h"
#include "trace/request_record.h"
#include "trace/workload.h"

namespace ds41::sim {

// Where prompt KV is cached: the shared store every node reads (this system), or only on the
// encoder that computed it (systems without a shared store: a hit counts only on that node, the
// router has no index to look H up in, and the decoder fetches the prefix from that encoder).
enum class CacheScope { kShared, kPerNode };
const char* CacheScopeName(CacheScope s);

struct SimOptions {
  int encoders = 2, decoders = 2;
  PlacementPolicy policy = PlacementPolicy::kCost;
  CacheScope scope = CacheScope::kShared;
  int unit_tokens = 64;          // router --unit-tokens
  double poll_s = 1.0;           // router --poll-ms / 1000
  int concurrency = 64;          // client slots (ReplayOptions::concurrency)
  double deadline_s = 60;        // the client gives up (ReplayOptions::deadline_s)
  int router_workers = 3;        // router threads that check, tokenize and place requests (--workers 4, one
                                 // is the caller's); a request frees its worker once placed
  int router_max_running = 256;  // router --max-running
  double router_max_queue_s = 8;   // router --max-queue-seconds (0: no shedding; the router's default)
  double router_timeout_s = 600;   // router --request-timeout-seconds: the deadline it places against
  size_t max_sessions = 100000;  // session bindings the router keeps
  uint64_t seed = 1;             // placement's random draws
  std::optional<CostModel> cost; // the router's cost model (its --cost-profile); none: CostModel's defaults
};

struct SimFacts {
  uint64_t events = 0;
  double simulated_s = 0;        // simulated time at the last event
  double wall_s = 0;             // the event loop's wall time
  double speedup() const { return wall_s > 0 ? simulated_s / wall_s : 0; }
  std::vector<double> place_s;   // wall time of each Placer::Place call
  std::vector<double> attempt_s; // and of each whole decision (DecideAttempt: Place, then Served)
  uint64_t store_bytes = 0, store_units = 0, store_evicted = 0;
  uint64_t encoder_steps = 0, decoder_steps = 0;
  double cpu_work_s = 0;         // work the nodes did (seconds of one thread / one node at full speed)
};

struct SimResult {
  std::vector<RequestRecord> records;  // in workload order
  SimFacts facts;
};

// InvalidArgument naming the option out of range.
Status ValidateSimOptions(const SimOptions& o);

// `on_record` (may be empty) sees each record as it is completed, in completion order.
SimResult Simulate(const std::vector<WorkloadRequest>& workload, const RateProfile& profile, const SimOptions& options,
                   const std::function<void(const RequestRecord&)>& on_record = {});

}  // namespace ds41::sim
