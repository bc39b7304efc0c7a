// Reading the Mooncake trace format (kvcache-ai/Mooncake FAST25-release/traces, one JSON object a
// line: `timestamp` ms, `input_length`, `output_length`, `hash_ids`), as the replay and the
// simulator read it. See ../shared/data/mooncake/README.md for what the fields mean.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "util/status.h"

namespace ds41 {

// One request of the trace.
struct TraceRequest {
  int64_t timestamp_ms = 0;            // arrival, from the start of the trace
  int64_t input_length = 0;            // prompt tokens
  int64_t output_length = 0;           // generated tokens
  std::vector<int64_t> hash_ids;       // one id per 512-token prefix block; equal ids = equal prefixes
};

// The requests of a trace file, sorted by timestamp (stable: equal timestamps keep file order).
// Blank lines are skipped. Errors (InvalidArgument, naming the file and line): a line that is not a
// JSON object; a missing or non-integer field; a negative timestamp or length; a hash id that is
// not a non-negative integer. NotFound when the file cannot be opened.
StatusOr<std::vector<TraceRequest>> ReadMooncakeTrace(const std::string& path);

// The same over a stream; `name` prefixes error messages ("name:LINE: ...").
StatusOr<std::vector<TraceRequest>> ParseMooncakeTrace(std::istream& in, const std::string& name);

}  // namespace ds41
