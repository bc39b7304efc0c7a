#include "sim/sim_run.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "sim/sim_router.h"
#include "trace/mooncake_trace.h"
#include "trace/run_header.h"

namespace ds41::sim {
namespace {

using Json = nlohmann::json;

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

Json OptionsJson(const SimRunSpec& spec, const RateProfile& p, size_t requests) {
  const SimOptions& s = spec.sim;
  Json o = {{"simulator", true},
            {"profile", spec.profile_path},
            {"cost_profile", spec.cost_profile_path},
            {"profile_name", p.name},
            {"requests", requests},
            {"encoders", s.encoders},
            {"decoders", s.decoders},
            {"policy", PlacementPolicyName(s.policy)},
            {"cache_scope", CacheScopeName(s.scope)},
            {"poll_s", s.poll_s},
            {"concurrency", s.concurrency},
            {"deadline_s", s.deadline_s},
            {"router_workers", s.router_workers},
            {"router_max_queue_s", s.router_max_queue_s},
            {"router_timeout_s", s.router_timeout_s},
            {"seed", s.seed}};
  AddWorkloadOptions(spec.trace_path, spec.workload, &o);
  return o;
}

}  // namespace

void PrintSimFacts(std::ostream& os, const SimFacts& f, size_t requests) {
  auto line = [&](const char* name, std::vector<double> us) {
    for (double& v : us) v *= 1e6;
    os << name << us.size() << " calls: p50 " << Fmt("%.1f", Percentile(us, 50)) << " us, p99 " << Fmt("%.1f", Percentile(us, 99))
       << " us, max " << Fmt("%.1f", Percentile(us, 100)) << " us\n";
  };
  os << "simulator\n";
  os << "  events          " << f.events << " (" << requests << " requests)\n";
  os << "  time            " << Fmt("%.1f", f.simulated_s) << " s simulated in " << Fmt("%.2f", f.wall_s)
     << " s wall: " << Fmt("%.0f", f.speedup()) << "x real time\n";
  line("  Placer::Place   ", f.place_s);
  line("  DecideAttempt   ", f.attempt_s);  // Place, then Served (prefix affinity records the chain)
  os << "  store           " << Fmt("%.3f", static_cast<double>(f.store_bytes) / 1e9) << " GB in " << f.store_units
     << " units at the end, " << f.store_evicted << " evicted\n";
  os << "  work            " << f.encoder_steps << " encoder steps, " << f.decoder_steps << " decode steps, "
     << Fmt("%.1f", f.cpu_work_s) << " s of work\n";
}

StatusOr<SimRunResult> RunSimulation(const SimRunSpec& spec, std::ostream& os) {
  DS41_RETURN_IF_ERROR(ValidateSimOptions(spec.sim));
  if (!(spec.workload.token_scale > 0) || !(spec.workload.time_scale > 0) || spec.workload.replicas < 1)
    return InvalidArgumentError("--token-scale and --time-scale must be positive, --replicas at least 1");
  DS41_ASSIGN_OR_RETURN(RateProfile profile, ReadRateProfile(spec.profile_path));
  SimOptions sim = spec.sim;
  if (!spec.cost_profile_path.empty()) {
    DS41_ASSIGN_OR_RETURN(RateProfile cost_profile, ReadRateProfile(spec.cost_profile_path));
    sim.cost = CostModelFromProfile(cost_profile);
  }
  DS41_ASSIGN_OR_RETURN(std::vector<TraceRequest> trace, ReadMooncakeTrace(spec.trace_path));
  const std::vector<WorkloadRequest> workload = BuildWorkload(trace, spec.workload);
  if (workload.empty()) return InvalidArgumentError("the window of the trace holds no request");

  RunHeader h;
  h.label = spec.label.empty() ? std::string(PlacementPolicyName(spec.sim.policy)) + "@sim" : spec.label;
  h.unit_tokens = spec.sim.unit_tokens;
  h.ceiling = PrefixHitCeiling(workload, spec.sim.unit_tokens);
  h.slo = spec.slo;
  for (int i = 0; i < spec.sim.decoders; ++i) h.nodes.decoders.push_back(SimRouter::DecoderName(i));
  for (int i = 0; i < spec.sim.encoders; ++i) h.nodes.encoders.push_back(SimRouter::EncoderName(i));
  h.options = OptionsJson(spec, profile, workload.size());

  int64_t prompt_tokens = 0, output_tokens = 0;
  std::unordered_set<std::string> sessions;
  for (const WorkloadRequest& w : workload) {
    prompt_tokens += w.prompt_tokens;
    output_tokens += w.output_tokens;
    sessions.insert(w.session);
  }
  os << "simulating " << workload.size() << " requests of " << sessions.size() << " sessions over " << Fmt("%.1f", workload.back().arrival_s) << " s ("
     << prompt_tokens << " prompt tokens, " << output_tokens << " output tokens; ceiling "
     << Fmt("%.1f", 100 * h.ceiling.share()) << " % at unit " << spec.sim.unit_tokens << ") on " << spec.sim.encoders
     << " encoders and " << spec.sim.decoders << " decoders, policy " << PlacementPolicyName(spec.sim.policy) << ", "
     << CacheScopeName(spec.sim.scope) << " cache, profile " << profile.name << " (host cores "
     << profile.host_cores << ")" << std::endl;

  SimResult res = Simulate(workload, profile, sim);
  if (!spec.out_path.empty()) DS41_RETURN_IF_ERROR(WriteRecordFile(spec.out_path, res.records, RunHeaderJson(h)));
  SimRunResult out;
  out.summary = Summarize(res.records, h.ceiling, h.slo, WallSecondsOf(res.records), h.nodes);
  out.summary.label = h.label;
  if (spec.list_nodes) {
    PrintSummary(os, out.summary);
  } else {
    // The per-node lines of a large cluster say little; the pools' figures stay.
    Summary s = out.summary;
    for (PoolShare* p : {&s.decoders, &s.encoders}) p->nodes.clear();
    std::ostringstream text;
    PrintSummary(text, s);
    os << text.str();
    os << "  (per-node lines left out: " << out.summary.decoders.nodes.size() << " decoders, CV "
       << Fmt("%.3f", out.summary.decoders.request_cv) << "; " << out.summary.encoders.nodes.size() << " encoders, CV "
       << Fmt("%.3f", out.summary.encoders.request_cv) << ")\n";
  }
  PrintSimFacts(os, res.facts, workload.size());
  if (!spec.out_path.empty()) os << "records: " << spec.out_path << std::endl;
  out.facts = std::move(res.facts);
  return out;
}

}  // namespace ds41::sim
