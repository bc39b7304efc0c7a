// RunHeader: what a record file's first line says about its run — the label, the prefix-hit
// ceiling of the workload it played, the SLO and the nodes — so its summary can be printed again
// from the file alone (`ds41-trace-replay summarize`), exactly as the run printed it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "trace/summary.h"
#include "trace/workload.h"
#include "util/status.h"

namespace ds41 {

struct RunHeader {
  std::string label;        // e.g. "cost@90": policy@load, which `plot` sweeps over
  int unit_tokens = 0;      // the ceiling's unit
  HitCeiling ceiling;       // of the workload played, at unit_tokens
  SloOptions slo;
  ExpectedNodes nodes;      // may be empty
  nlohmann::json options = nlohmann::json::object();  // how the run was made (endpoint, trace, scales)
};

// {"label": ..., "unit_tokens": ..., "ceiling": {"prompt_tokens", "hit_tokens"}, "slo": {"ttft_s",
// "itl_s"}, "nodes": {"decoders": [...], "encoders": [...]}, "options": {...}}
nlohmann::json RunHeaderJson(const RunHeader& h);
// Missing fields keep their defaults; wrong types are InvalidArgument naming the field.
StatusOr<RunHeader> RunHeaderFromJson(const nlohmann::json& j);

// The workload part of a header's "options" (trace, scales, window, replicas, sampling), written by
// the replay and the simulator alike, and read back to rebuild the workload a run played.
void AddWorkloadOptions(const std::string& trace_path, const WorkloadOptions& w, nlohmann::json* options);
// The options' workload (missing fields: defaults) and trace path ("" when absent).
WorkloadOptions WorkloadOptionsOf(const nlohmann::json& options, std::string* trace_path);

}  // namespace ds41
