// The simulator's `run` command: a trace window as a workload (trace/workload.h), simulated on the
// modelled cluster (simulator.h), summarized exactly as ds41-trace-replay summarizes a real run
// (trace/summary.h), followed by the simulator's own facts: events, simulated and wall seconds, the
// speed-up over real time and the wall time of the real placement calls. With --out the records go
// to a JSONL file with the replay's header line, so `ds41-trace-replay summarize` and `plot` read
// simulated and measured runs alike.
#pragma once

#include <ostream>
#include <string>

#include "router/rate_profile.h"
#include "sim/simulator.h"
#include "trace/summary.h"
#include "trace/workload.h"
#include "util/status.h"

namespace ds41::sim {

struct SimRunSpec {
  std::string trace_path;
  std::string profile_path;
  std::string cost_profile_path;  // the router's --cost-profile ("": its default rates)
  std::string out_path;   // "" : no record file
  std::string label;      // e.g. "cost@90"; default "<policy>@sim"
  WorkloadOptions workload;
  SimOptions sim;
  SloOptions slo;
  bool list_nodes = true;  // the summary's per-node lines
};

struct SimRunResult {
  Summary summary;
  SimFacts facts;
};

StatusOr<SimRunResult> RunSimulation(const SimRunSpec& spec, std::ostream& os);
// The facts block `run` prints after the summary.
void PrintSimFacts(std::ostream& os, const SimFacts& f, size_t requests);

}  // namespace ds41::sim
