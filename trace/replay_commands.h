// The commands of ds41-trace-replay (the binary only parses flags): `run` replays a trace against a
// cluster and writes records and summary; `summarize` prints the summaries of record files again.
//
// Files of a run with --out run.jsonl: run.jsonl holds a header line (trace/run_header.h: label,
// prefix-hit ceiling of the workload at --unit-tokens, SLO, expected nodes, the run's options) and
// then one RequestRecord a line in the order they finished; run.summary.json holds SummaryJson of
// the run. `summarize` recomputes the same summary from run.jsonl alone: the ceiling, SLO and nodes
// from the header, the wall time as WallSecondsOf(records) (the run uses the same definition).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "trace/replay_client.h"
#include "trace/summary.h"
#include "trace/workload.h"
#include "util/status.h"

namespace ds41 {

struct RunSpec {
  std::string trace_path;
  std::string out_path;  // the records (JSONL); the summary goes beside it
  std::string label;     // "policy@load" to take part in `plot`'s load sweep
  WorkloadOptions workload;
  ReplayOptions replay;
  int unit_tokens = 64;  // the ceiling's unit: the cluster's cache unit
  SloOptions slo;
  ExpectedNodes nodes;
};

// "run.jsonl" -> "run.summary.json" (any other name gets ".summary.json" appended).
std::string SummaryPathFor(const std::string& records_path);

// Replays spec's workload (after a probe request), writes the records and the summary files, prints
// the summary to `os` and returns it. Errors: the trace, the probe (what to change), the files.
StatusOr<Summary> RunTraceReplay(const RunSpec& spec, std::ostream& os);

// The summary of a record file, as `run` printed it (the label is the header's, else the file's
// name without .jsonl).
StatusOr<Summary> SummarizeRecordFile(const std::string& path);

}  // namespace ds41
