#include "trace/mooncake_trace.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ds41 {
namespace {

using Json = nlohmann::json;

// The non-negative integer field `key` of `j`, or the error naming it.
StatusOr<int64_t> Field(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return InvalidArgumentError(std::string("missing \"") + key + "\"");
  if (!it->is_number_integer()) return InvalidArgumentError(std::string("\"") + key + "\" must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v < 0) return InvalidArgumentError(std::string("\"") + key + "\" is negative (" + std::to_string(v) + ")");
  return v;
}

StatusOr<TraceRequest> ParseLine(const std::string& line) {
  const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError("not a JSON object");
  TraceRequest r;
  DS41_ASSIGN_OR_RETURN(r.timestamp_ms, Field(j, "timestamp"));
  DS41_ASSIGN_OR_RETURN(r.input_length, Field(j, "input_length"));
  DS41_ASSIGN_OR_RETURN(r.output_length, Field(j, "output_length"));
  auto ids = j.find("hash_ids");
  if (ids == j.end()) return InvalidArgumentError("missing \"hash_ids\"");
  if (!ids->is_array()) return InvalidArgumentError("\"hash_ids\" must be an array");
  r.hash_ids.reserve(ids->size());
  for (const Json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) {
      return InvalidArgumentError("\"hash_ids\" entries must be non-negative integers");
    }
    r.hash_ids.push_back(id.get<int64_t>());
  }
  return r;
}

}  // namespace

StatusOr<std::vector<TraceRequest>> ParseMooncakeTrace(std::istream& in, const std::string& name) {
  std::vector<TraceRequest> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    StatusOr<TraceRequest> r = ParseLine(line);
    if (!r.ok()) return InvalidArgumentError(name + ":" + std::to_string(n) + ": " + r.status().message());
    out.push_back(std::move(r).value());
  }
  if (in.bad()) return DataLossError(name + ": read error");
  std::stable_sort(out.begin(), out.end(),
                   [](const TraceRequest& a, const TraceRequest& b) { return a.timestamp_ms < b.timestamp_ms; });
  return out;
}

StatusOr<std::vector<TraceRequest>> ReadMooncakeTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot open the trace " + path);
  return ParseMooncakeTrace(in, path);
}

}  // namespace ds41
