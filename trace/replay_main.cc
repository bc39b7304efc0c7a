// ds41-trace-replay: replays a Mooncake trace through a cluster's OpenAI API and summarizes and
// plots the runs. Thin: flags -> trace/replay_commands.h and trace/plot.h.
#include <CLI/CLI.hpp>
#include <iostream>

#include "trace/plot.h"
#include "trace/replay_commands.h"
#include "util/split_list.h"

namespace {

int Fail(const ds41::Status& s) {
  std::cerr << "ds41-trace-replay: " << s.ToString() << "\n";
  return s.code() == ds41::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds41-trace-replay: replay a Mooncake trace through a cluster's OpenAI API (README.md § Trace replay)"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows every default

  ds41::RunSpec spec;
  std::string decoders, encoders;
  CLI::App* run = app.add_subcommand("run", "replay a trace, write records (JSONL) and the summary");
  run->add_option("--endpoint", spec.replay.endpoint, "the cluster's OpenAI API (http://host:port, /v1 optional)")
      ->envname("DS41_ENDPOINT");
  run->add_option("--trace", spec.trace_path, "Mooncake trace (JSONL)")->required();
  run->add_option("--out", spec.out_path, "records file (JSONL); the summary goes to <name>.summary.json")->required();
  run->add_option("--label", spec.label, "the run's name in summaries and plots, policy@load for a load sweep");
  run->add_option("--token-scale", spec.workload.token_scale, "every length x this, block structure kept (1/8: 64-token blocks)")
      ->check(CLI::PositiveNumber);
  run->add_option("--time-scale", spec.workload.time_scale, "every inter-arrival time x this (2 = half the rate)")
      ->check(CLI::PositiveNumber);
  run->add_option("--start", spec.workload.start_s, "window start, seconds from the trace file's first request")->check(CLI::NonNegativeNumber);
  run->add_option("--duration", spec.workload.duration_s, "window length, seconds of trace time (default: all)")
      ->check(CLI::PositiveNumber);
  run->add_option("--max-requests", spec.workload.max_requests, "send at most this many (default: all)");
  run->add_option("--session-sample", spec.workload.session_sample,
                  "keep 1 session in K, each with all its turns (the trace's reuse at 1/K of its rate)")
      ->check(CLI::Range(1, 1000000));
  run->add_option("--replicas", spec.workload.replicas, "copies of the trace with disjoint prefixes and sessions (x rate)")
      ->check(CLI::Range(1, 1000));
  run->add_flag("--replica-stagger", spec.workload.replica_stagger,
                "copy r moves each session whole by r/R of the window (wrapping): R times the rate spread out, not R at each arrival");
  run->add_option("--trace-block-tokens", spec.workload.trace_block_tokens, "the trace's block size")
      ->check(CLI::Range(1, 1 << 20));
  run->add_option("--concurrency", spec.replay.concurrency, "requests in flight at most (client threads)")
      ->check(CLI::Range(1, 100000));
  run->add_option("--deadline", spec.replay.deadline_s, "seconds from arrival before a request is abandoned (timeout)")
      ->check(CLI::PositiveNumber);
  run->add_option("--api-key", spec.replay.api_key, "sent as Authorization: Bearer")->envname("DS41_API_KEY");
  run->add_option("--model", spec.replay.model, "the model name");
  run->add_option("--min-token-id", spec.replay.min_token_id, "prompt ids start here (above the special tokens)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--vocab", spec.replay.vocab, "prompt ids stay below this (the model's vocabulary size)")
      ->check(CLI::PositiveNumber);
  run->add_option("--temperature", spec.replay.temperature, "sampling temperature (0: greedy)")->check(CLI::Range(0.0, 2.0));
  run->add_option("--seed", spec.replay.seed, "sampling seed of every request (with --temperature > 0)");
  run->add_flag("!--no-ignore-eos", spec.replay.ignore_eos,
                "let EOS end replies (servers without vLLM's ignore_eos); outputs may be shorter than the trace's");
  run->add_option("--unit-tokens", spec.unit_tokens, "the cluster's cache unit, for the hit ceiling")
      ->check(CLI::Range(1, 1 << 20));
  run->add_option("--slo-ttft", spec.slo.ttft_s, "goodput: TTFT objective, seconds")->check(CLI::PositiveNumber);
  run->add_option("--slo-itl", spec.slo.itl_s, "goodput: mean inter-token objective, seconds")->check(CLI::PositiveNumber);
  run->add_option("--expect-decoders", decoders, "decoders to count even when idle (as usage.ds41 names them), comma separated");
  run->add_option("--expect-encoders", encoders, "encoders to count even when idle, comma separated");
  run->add_flag("!--no-progress", spec.replay.progress, "no progress lines on stderr");

  std::vector<std::string> files;
  bool as_json = false;
  CLI::App* summarize = app.add_subcommand("summarize", "print the summaries of record files again");
  summarize->add_option("files", files, "record files (JSONL)")->required()->check(CLI::ExistingFile);
  summarize->add_flag("--json", as_json, "print each summary as JSON, one a line");
  bool as_table = false;
  summarize->add_flag("--markdown", as_table, "print the summaries as one Markdown table");

  std::string plot_dir, gnuplot = "gnuplot";
  CLI::App* plot = app.add_subcommand("plot", "PNG figures of record files: TTFT CDF, load sweep (labels policy@load)");
  plot->add_option("--out", plot_dir, "folder for the figures")->required();
  plot->add_option("--gnuplot", gnuplot, "the gnuplot executable");
  plot->add_option("files", files, "record files (JSONL)")->required()->check(CLI::ExistingFile);

  CLI11_PARSE(app, argc, argv);

  if (run->parsed()) {
    spec.nodes.decoders = ds41::SplitList(decoders);
    spec.nodes.encoders = ds41::SplitList(encoders);
    auto s = ds41::RunTraceReplay(spec, std::cout);
    return s.ok() ? 0 : Fail(s.status());
  }
  std::vector<ds41::PlotRun> runs;
  std::vector<ds41::Summary> table;
  for (const std::string& f : files) {
    auto s = ds41::SummarizeRecordFile(f);
    if (!s.ok()) return Fail(s.status());
    if (summarize->parsed()) {
      if (as_table) {
        table.push_back(*s);
      } else if (as_json) {
        std::cout << ds41::SummaryJson(*s).dump() << "\n";
      } else {
        ds41::PrintSummary(std::cout, *s);
      }
      continue;
    }
    auto records = ds41::ReadRecordFile(f);
    if (!records.ok()) return Fail(records.status());
    runs.push_back({s->label, std::move(records->records), *s});
  }
  if (as_table) ds41::PrintSummaryTable(std::cout, table);
  if (plot->parsed()) {
    auto pngs = ds41::PlotRuns(runs, plot_dir, gnuplot);
    if (!pngs.ok()) return Fail(pngs.status());
    for (const std::string& p : *pngs) std::cout << p << "\n";
  }
  return 0;
}
