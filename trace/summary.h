// Summary: the figures of a run, computed from its records alone, so the replay (real cluster) and
// the simulator print the same thing the same way.
//
// Percentiles are nearest-rank: the p-th percentile of n sorted values is the value at rank
// ceil(p/100 * n) (1-based; rank 1 for p = 0), always one of the values; 0 when there are none.
// The coefficient of variation (CV) of a pool is the population standard deviation of its nodes'
// shares over their mean.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "trace/request_record.h"
#include "trace/workload.h"

namespace ds41 {

// Goodput's service-level objective.
struct SloOptions {
  double ttft_s = 2.0;  // time to first token, from the scheduled arrival
  double itl_s = 0.2;   // mean inter-token gap of the request
};

// Nodes that should appear in the load figures even when no request reached them (an idle node
// counts as a share of 0). Names as usage.ds41 reports them.
struct ExpectedNodes {
  std::vector<std::string> decoders, encoders;
};

struct NodeShare {
  int64_t requests = 0;         // ok requests placed on the node
  double request_share = 0;     // of the pool's ok requests
  int64_t computed_tokens = 0;  // encoders: prompt tokens computed there
  double token_share = 0;       // encoders: of the pool's computed tokens
};

struct PoolShare {
  std::map<std::string, NodeShare> nodes;
  double request_cv = 0, request_max_over_mean = 0;  // over request_share
  double token_cv = 0, token_max_over_mean = 0;      // over token_share (encoders)
};

struct Summary {
  std::string label;  // the run's (set by the caller; Summarize leaves it empty)
  int64_t requests = 0, ok = 0, rejected = 0, failed = 0, timeout = 0;
  double wall_s = 0;

  // Prefix reuse over ok requests, against the unbounded exact-prefix ceiling (workload.h).
  int64_t prompt_tokens = 0, cached_tokens = 0;
  double hit_share = 0;      // cached / prompt tokens
  double ceiling_share = 0;  // HitCeiling::share()
  double hit_over_ceiling = 0;
  // CausalHitCeiling at the run's own TTFTs (-1: unknown, e.g. the trace is not at hand).
  double causal_ceiling_share = -1;

  // Latency (seconds). TTFT and e2e over ok requests; inter-token gaps over every gap of them.
  double ttft_mean = 0, ttft_p50 = 0, ttft_p90 = 0, ttft_p99 = 0;
  double itl_p50 = 0, itl_p99 = 0;
  double e2e_mean = 0, e2e_p99 = 0;
  int64_t completion_tokens = 0;
  // How quickly refusals came: e2e (arrival to the answer) over rejected requests.
  double reject_p50 = 0, reject_p99 = 0;

  // Goodput: ok requests with TTFT <= slo.ttft_s and mean gap <= slo.itl_s (one with no gap meets
  // the gap objective), per second of wall time and as a share of all requests.
  SloOptions slo;
  int64_t good = 0;
  double goodput_rps = 0, goodput_share = 0;

  // Work: prompt tokens the encoders computed (all records) and prefix bytes the decoders read.
  int64_t encoder_tokens = 0;
  int64_t kv_bytes_read = 0;

  PoolShare decoders, encoders;
};

// The summary of `records`; `wall_seconds` is the run's length (goodput's denominator).
Summary Summarize(const std::vector<RequestRecord>& records, const HitCeiling& ceiling, const SloOptions& slo,
                  double wall_seconds, const ExpectedNodes& expected = {});

// CausalHitCeiling of `workload` at the TTFTs of `records` (matched by index; a request without an
// ok record never made its prefix ready): the share Summary::causal_ceiling_share holds.
double CausalCeilingShare(const std::vector<WorkloadRequest>& workload, const std::vector<RequestRecord>& records,
                          int unit_tokens);

// The run's length as the records show it: from 0 (the first scheduled arrival) to the latest
// arrival_s + e2e_s.
double WallSecondsOf(const std::vector<RequestRecord>& records);

// The nearest-rank percentile of `values` (any order). REQUIRES: 0 <= p <= 100.
double Percentile(std::vector<double> values, double p);
// Population standard deviation over mean; 0 when there are fewer than 2 values or the mean is 0.
double CoefficientOfVariation(const std::vector<double>& values);

// A human-readable table (headed by the label when there is one).
void PrintSummary(std::ostream& os, const Summary& s);
nlohmann::json SummaryJson(const Summary& s);
// Summaries as one Markdown table, a row each (docs/benchmarks.md): outcomes, hit share and its
// ratio to the ceiling, TTFT mean / p50 / p90 / p99, goodput, and each pool's max/mean share.
void PrintSummaryTable(std::ostream& os, const std::vector<Summary>& summaries);

}  // namespace ds41
