#include "trace/replay_commands.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "trace/mooncake_trace.h"
#include "trace/run_header.h"

namespace ds41 {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kRecordsSuffix = ".jsonl";

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A record file's name without its folder and .jsonl: the label of a run that has none.
std::string StemOf(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  if (EndsWith(name, kRecordsSuffix)) name.resize(name.size() - kRecordsSuffix.size());
  return name;
}

Json OptionsJson(const RunSpec& spec, size_t requests) {
  Json o = {{"endpoint", spec.replay.endpoint},
            {"model", spec.replay.model},
            {"requests", requests},
            {"concurrency", spec.replay.concurrency},
            {"deadline_s", spec.replay.deadline_s},
            {"token_ids", {spec.replay.min_token_id, spec.replay.vocab}},
            {"temperature", spec.replay.temperature},
            {"seed", spec.replay.seed},
            {"ignore_eos", spec.replay.ignore_eos}};
  AddWorkloadOptions(spec.trace_path, spec.workload, &o);
  return o;
}

Status WriteJsonFile(const std::string& path, const Json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return DataLossError("cannot write " + path);
  return Status::Ok();
}

// The workload a run's header describes (its trace and options), rebuilt to recompute what needs
// the requests' blocks; an error when the trace cannot be read.
StatusOr<std::vector<WorkloadRequest>> WorkloadOfRun(const RunHeader& h) {
  std::string trace_path;
  const WorkloadOptions w = WorkloadOptionsOf(h.options, &trace_path);
  if (trace_path.empty()) return NotFoundError("no trace in the run header");
  DS41_ASSIGN_OR_RETURN(std::vector<TraceRequest> trace, ReadMooncakeTrace(trace_path));
  return BuildWorkload(trace, w);
}

}  // namespace

std::string SummaryPathFor(const std::string& records_path) {
  if (EndsWith(records_path, kRecordsSuffix)) {
    return records_path.substr(0, records_path.size() - kRecordsSuffix.size()) + ".summary.json";
  }
  return records_path + ".summary.json";
}

StatusOr<Summary> RunTraceReplay(const RunSpec& spec, std::ostream& os) {
  if (spec.unit_tokens < 1) return InvalidArgumentError("--unit-tokens must be positive");
  if (!(spec.workload.token_scale > 0) || !(spec.workload.time_scale > 0) || spec.workload.replicas < 1) {
    return InvalidArgumentError("--token-scale and --time-scale must be positive, --replicas at least 1");
  }
  DS41_ASSIGN_OR_RETURN(std::vector<TraceRequest> trace, ReadMooncakeTrace(spec.trace_path));
  const std::vector<WorkloadRequest> workload = BuildWorkload(trace, spec.workload);
  if (workload.empty()) return InvalidArgumentError("the window of the trace holds no request");

  RunHeader h;
  h.label = spec.label.empty() ? StemOf(spec.out_path) : spec.label;
  h.unit_tokens = spec.unit_tokens;
  h.ceiling = PrefixHitCeiling(workload, spec.unit_tokens);
  h.slo = spec.slo;
  h.nodes = spec.nodes;
  h.options = OptionsJson(spec, workload.size());

  DS41_ASSIGN_OR_RETURN(std::unique_ptr<ReplayClient> client, ReplayClient::Create(spec.replay));
  DS41_RETURN_IF_ERROR(client->Probe());
  DS41_ASSIGN_OR_RETURN(std::unique_ptr<RecordWriter> out, RecordWriter::Open(spec.out_path, RunHeaderJson(h)));
  int64_t prompt_tokens = 0, output_tokens = 0;
  for (const WorkloadRequest& w : workload) {
    prompt_tokens += w.prompt_tokens;
    output_tokens += w.output_tokens;
  }
  os << "replaying " << workload.size() << " requests over " << workload.back().arrival_s << " s (" << prompt_tokens
     << " prompt tokens, " << output_tokens << " output tokens; ceiling " << 100 * h.ceiling.share()
     << " % at unit " << spec.unit_tokens << ") against " << spec.replay.endpoint << std::endl;

  DS41_ASSIGN_OR_RETURN(std::vector<RequestRecord> records, RunReplay(*client, workload, spec.replay, out.get()));
  DS41_RETURN_IF_ERROR(out->Close());
  Summary s = Summarize(records, h.ceiling, h.slo, WallSecondsOf(records), h.nodes);
  s.label = h.label;
  s.causal_ceiling_share = CausalCeilingShare(workload, records, spec.unit_tokens);
  PrintSummary(os, s);
  const std::string summary_path = SummaryPathFor(spec.out_path);
  DS41_RETURN_IF_ERROR(WriteJsonFile(summary_path, SummaryJson(s)));
  os << "records: " << spec.out_path << ", summary: " << summary_path << std::endl;
  return s;
}

StatusOr<Summary> SummarizeRecordFile(const std::string& path) {
  DS41_ASSIGN_OR_RETURN(RecordFile f, ReadRecordFile(path));
  RunHeader h;
  if (!f.header.is_null()) {
    StatusOr<RunHeader> parsed = RunHeaderFromJson(f.header);
    if (!parsed.ok()) return parsed.status().Prefixed(path);
    h = std::move(parsed).value();
  }
  Summary s = Summarize(f.records, h.ceiling, h.slo, WallSecondsOf(f.records), h.nodes);
  s.label = h.label.empty() ? StemOf(path) : h.label;
  if (StatusOr<std::vector<WorkloadRequest>> w = WorkloadOfRun(h); w.ok()) {
    s.causal_ceiling_share = CausalCeilingShare(*w, f.records, h.unit_tokens);
  }
  return s;
}

}  // namespace ds41
