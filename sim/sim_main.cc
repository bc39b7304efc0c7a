// ds41-sim: the cluster simulator (docs/simulator.md). Thin: flags -> sim/sim_run.h,
// sim/calibrate.h, sim/bench_placement.h.
#include <CLI/CLI.hpp>
#include <iostream>

#include "sim/bench_placement.h"
#include "sim/calibrate.h"
#include "sim/sim_run.h"

namespace {

int Fail(const ds41::Status& s) {
  std::cerr << "ds41-sim: " << s.ToString() << "\n";
  return s.code() == ds41::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds41-sim: discrete-event simulator of a ds41-serve cluster running the router's placement code"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();

  std::vector<std::string> policies;
  for (ds41::PlacementPolicy p : ds41::kPlacementPolicies) policies.push_back(ds41::PlacementPolicyName(p));

  ds41::sim::SimRunSpec spec;
  std::string policy = "cost", scope = "shared";
  double poll_ms = 1000;
  bool no_node_lines = false;
  CLI::App* run = app.add_subcommand("run", "simulate a trace on a modelled cluster and print the replay's summary");
  run->add_option("--trace", spec.trace_path, "Mooncake trace (JSONL)")->required()->check(CLI::ExistingFile);
  run->add_option("--profile", spec.profile_path, "rate profile (JSON; ds41-sim calibrate or sim/profiles/)")
      ->required()
      ->check(CLI::ExistingFile);
  run->add_option("--cost-profile", spec.cost_profile_path,
                  "the router's --cost-profile: rates its cost model starts from (default: its generic rates)")
      ->check(CLI::ExistingFile);
  run->add_option("--out", spec.out_path, "records file (JSONL, the replay's format)");
  run->add_option("--label", spec.label, "the run's name (default <policy>@sim)");
  run->add_option("--token-scale", spec.workload.token_scale, "every length x this")->check(CLI::PositiveNumber);
  run->add_option("--time-scale", spec.workload.time_scale, "every inter-arrival time x this")->check(CLI::PositiveNumber);
  run->add_option("--start", spec.workload.start_s, "window start, seconds from the trace file's first request")->check(CLI::NonNegativeNumber);
  run->add_option("--duration", spec.workload.duration_s, "window length, seconds of trace time")->check(CLI::PositiveNumber);
  run->add_option("--max-requests", spec.workload.max_requests, "at most this many requests");
  run->add_option("--output-scale", spec.workload.output_scale,
                  "output lengths x this as well (< 1: a prefill-heavy mix, > 1: decode-heavy)")
      ->check(CLI::PositiveNumber);
  run->add_option("--session-sample", spec.workload.session_sample,
                  "keep 1 session in K, each with all its turns (the trace's reuse at 1/K of its rate)")
      ->check(CLI::Range(1, 1000000));
  run->add_option("--replicas", spec.workload.replicas, "copies of the trace with disjoint prefixes and sessions")
      ->check(CLI::Range(1, 100000));
  run->add_flag("--replica-stagger", spec.workload.replica_stagger,
                "copy r moves each session whole by r/R of the window (wrapping): R times the rate spread out, not R at each arrival");
  run->add_option("--trace-block-tokens", spec.workload.trace_block_tokens, "the trace's block size")->check(CLI::Range(1, 1 << 20));
  run->add_option("--encoders", spec.sim.encoders, "encoder nodes")->check(CLI::Range(1, 100000));
  run->add_option("--decoders", spec.sim.decoders, "decoder nodes")->check(CLI::Range(1, 100000));
  run->add_option("--policy", policy, "placement policy")->check(CLI::IsMember(policies));
  run->add_option("--cache-scope", scope, "shared (the store) or per-node (each encoder its own cache)")
      ->check(CLI::IsMember({"shared", "per-node"}));
  run->add_option("--unit-tokens", spec.sim.unit_tokens, "cache unit (router --unit-tokens)")->check(CLI::Range(2, 4096));
  run->add_option("--poll-ms", poll_ms, "router's node poll interval")->check(CLI::PositiveNumber);
  run->add_option("--concurrency", spec.sim.concurrency, "client requests in flight at most")->check(CLI::Range(1, 10000000));
  run->add_option("--deadline", spec.sim.deadline_s, "seconds from arrival before the client gives up")->check(CLI::PositiveNumber);
  run->add_option("--router-workers", spec.sim.router_workers, "router threads that check, tokenize and place requests (its --workers - 1); a streaming request holds none")
      ->check(CLI::Range(1, 10000000));
  run->add_option("--router-max-running", spec.sim.router_max_running, "router --max-running")->check(CLI::Range(1, 10000000));
  run->add_option("--router-max-queue-seconds", spec.sim.router_max_queue_s,
                  "router --max-queue-seconds: a new request predicted to wait longer is refused (0: never)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--router-timeout", spec.sim.router_timeout_s, "router --request-timeout-seconds")->check(CLI::PositiveNumber);
  run->add_option("--seed", spec.sim.seed, "placement's random seed");
  run->add_option("--slo-ttft", spec.slo.ttft_s, "goodput: TTFT objective, seconds")->check(CLI::PositiveNumber);
  run->add_option("--slo-itl", spec.slo.itl_s, "goodput: mean inter-token objective, seconds")->check(CLI::PositiveNumber);
  run->add_flag("--no-node-lines", no_node_lines, "leave the per-node lines out of the summary (large clusters)");

  ds41::sim::CalibrateSpec cal;
  CLI::App* calibrate = app.add_subcommand("calibrate", "measure a rate profile on a running cluster through its API");
  calibrate->add_option("--endpoint", cal.endpoint, "the cluster's OpenAI API")->envname("DS41_ENDPOINT");
  calibrate->add_option("--out", cal.out_path, "profile file to write");
  calibrate->add_option("--model", cal.model, "the model name");
  calibrate->add_option("--api-key", cal.api_key, "sent as Authorization: Bearer")->envname("DS41_API_KEY");
  calibrate->add_option("--vocab", cal.vocab, "prompt ids stay below this")->check(CLI::PositiveNumber);
  calibrate->add_option("--min-token-id", cal.min_token_id, "prompt ids start here")->check(CLI::NonNegativeNumber);
  calibrate->add_option("--host-cores", cal.host_cores, "cores of the cluster's host (0: this machine's)")->check(CLI::Range(0, 4096));
  calibrate->add_option("--unit-tokens", cal.unit_tokens, "the cluster's cache unit")->check(CLI::Range(2, 4096));
  calibrate->add_option("--prefill-tokens", cal.prefill_tokens, "cold prompt lengths");
  calibrate->add_option("--repeats", cal.repeats, "times each cold length is sent")->check(CLI::Range(1, 100));
  calibrate->add_option("--hit-tokens", cal.hit_tokens, "prefix lengths of the hit probes (multiples of 2 units)");
  calibrate->add_option("--streams", cal.streams, "concurrent stream counts of the decode series");
  calibrate->add_option("--decode-tokens", cal.decode_tokens, "tokens each decode stream generates")->check(CLI::Range(8, 100000));
  calibrate->add_option("--decode-prompt-tokens", cal.decode_prompt_tokens, "prompt lengths of the decode series");

  ds41::sim::BenchPlacementSpec bench;
  int nodes = 0;
  std::vector<std::string> bench_policies;
  CLI::App* bp = app.add_subcommand("bench-placement", "time Placer::Place over many candidate nodes");
  bp->add_option("--nodes", nodes, "decoders and encoders each (overrides both)")->check(CLI::Range(1, 1000000));
  bp->add_option("--decoders", bench.decoders, "decoder candidates")->check(CLI::Range(1, 1000000));
  bp->add_option("--encoders", bench.encoders, "encoder candidates")->check(CLI::Range(1, 1000000));
  bp->add_option("--units", bench.units, "typical prompt length in units")->check(CLI::Range(1, 100000));
  bp->add_option("--samples", bench.samples, "timed calls per policy")->check(CLI::Range(1, 10000000));
  bp->add_option("--warmup", bench.warmup, "placements served before timing")->check(CLI::Range(0, 10000000));
  bp->add_option("--policy", bench_policies, "policies (default: all)")->check(CLI::IsMember(policies));
  bp->add_option("--seed", bench.seed, "random seed");

  CLI11_PARSE(app, argc, argv);

  if (run->parsed()) {
    spec.sim.policy = *ds41::ParsePlacementPolicy(policy);
    spec.sim.scope = scope == "shared" ? ds41::sim::CacheScope::kShared : ds41::sim::CacheScope::kPerNode;
    spec.sim.poll_s = poll_ms / 1000;
    spec.list_nodes = !no_node_lines;
    auto r = ds41::sim::RunSimulation(spec, std::cout);
    return r.ok() ? 0 : Fail(r.status());
  }
  if (calibrate->parsed()) {
    auto r = ds41::sim::Calibrate(cal, std::cout);
    return r.ok() ? 0 : Fail(r.status());
  }
  if (nodes > 0) bench.decoders = bench.encoders = nodes;
  for (const std::string& p : bench_policies) bench.policies.push_back(*ds41::ParsePlacementPolicy(p));
  auto r = ds41::sim::BenchPlacement(bench, std::cout);
  return r.ok() ? 0 : Fail(r.status());
}
