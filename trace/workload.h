// A trace turned into a workload: the requests a replay sends and a simulator plays, scaled in
// tokens and time, windowed, replicated, with sessions inferred from shared prefixes; the token ids
// of a request; and the prefix-hit ceiling of a workload.
//
// Every function here is pure (no I/O, no clock) and deterministic: the same trace and options give
// the same workload and the same tokens on every machine.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "trace/mooncake_trace.h"

namespace ds41 {

struct WorkloadOptions {
  // Every length × token_scale (1/8: 64-token blocks, prompts and outputs / 8), keeping the block
  // structure: a request spans as many blocks as in the trace.
  double token_scale = 1;
  // Output lengths × this as well (the prompt-length mix: < 1 makes the load prefill-heavy).
  double output_scale = 1;
  // Every inter-arrival time × time_scale (2 = half the rate).
  double time_scale = 1;
  int trace_block_tokens = 512;  // the trace's block size
  // The window [start_s, start_s + duration_s) of trace time (before time_scale) to keep, counted from
  // the file's first request.
  double start_s = 0;
  double duration_s = std::numeric_limits<double>::infinity();
  int64_t max_requests = -1;  // < 0: all; else the first max_requests (after replication)
  // R copies of the window with disjoint block ids and sessions, at the same arrival times (R times
  // the rate): copy r's block ids are the trace's + r * (largest id + 1).
  int replicas = 1;
  // With replicas: copy r moves each of its sessions whole by r / R of the window's span, wrapping
  // around it (turns keep their order and gaps; turns moved past the window's end are left out, as
  // the window leaves out turns past its own), so R copies offer R times the rate spread over the
  // window instead of R requests at every arrival (the trace's bursts R times over). Off by default:
  // the published runs used aligned copies.
  bool replica_stagger = false;
  // Keep 1 session in K (sessions numbered in order of first arrival, every K-th kept), each with
  // all its turns in the window: a slice with the trace's reuse between turns at 1/K of its rate.
  // Arrivals are re-based to the first request kept.
  int session_sample = 1;
};

struct WorkloadRequest {
  int64_t index = 0;        // position in the workload (arrival order)
  double arrival_s = 0;     // from the workload's start (the first request of the window is at 0)
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // >= 1
  int block_tokens = 0;       // tokens per block (the last block may be partial)
  std::vector<int64_t> blocks;  // block ids; equal ids = equal token prefixes
  std::string session = {};     // "s<N>", unique over the workload (and over replicas)
};

// The workload of `trace` (sorted by timestamp, as ReadMooncakeTrace returns it).
//
// Lengths: block_tokens = max(1, round(trace_block_tokens * token_scale)); a request with B blocks
// gets prompt_tokens = round(input_length * token_scale) clamped into
// [(B-1) * block_tokens + 1, B * block_tokens] (so it still ends in its B-th block), and
// output_tokens = max(1, round(output_length * token_scale * output_scale)).
// Times: arrival_s = (timestamp - first timestamp in the window) / 1000 * time_scale.
//
// Sessions (the trace has no session ids): a request's complete blocks are those its input fills
// (input_length / trace_block_tokens of them, in the trace's own units). Request r continues the
// session of the earlier request q whose complete blocks — at least 2 of them, so the block-0 prefix
// every request shares never links two conversations — are a prefix of r's blocks, choosing the
// longest such q (the latest one among equally long); otherwise r starts a new session. A trie over
// block ids, marked at the end of each request's complete blocks, finds q in O(blocks of r).
std::vector<WorkloadRequest> BuildWorkload(const std::vector<TraceRequest>& trace, const WorkloadOptions& options);

// The prompt's token ids: block b's i-th token is first_id + splitmix64(id_b, i) mod (end_id - first_id),
// blocks concatenated and cut at prompt_tokens. Equal block ids give equal tokens. Positions past
// the last block (none in a BuildWorkload result) take ids from the request's index.
// REQUIRES: 0 <= first_id < end_id.
std::vector<int32_t> WorkloadTokens(const WorkloadRequest& request, int32_t first_id, int32_t end_id);

// What an unbounded exact-prefix cache shared by every node would hit over the workload.
struct HitCeiling {
  int64_t prompt_tokens = 0;  // over all requests
  int64_t hit_tokens = 0;
  double share() const { return prompt_tokens > 0 ? static_cast<double>(hit_tokens) / prompt_tokens : 0; }
};

// The ceiling of `workload` in arrival order. A request hits the leading run of its blocks already
// seen in an earlier prompt (a block counts with the tokens of it some earlier prompt held; the run
// stops after the first block not seen whole), in tokens, capped at the largest multiple of
// unit_tokens <= prompt_tokens - 1: the last prompt token is always computed (it yields the first
// output token), and the store holds whole units. Then its blocks count as seen. REQUIRES:
// unit_tokens >= 1.
HitCeiling PrefixHitCeiling(const std::vector<WorkloadRequest>& workload, int unit_tokens);

// The same ceiling for a run that took time: a block counts only when an earlier request that held
// it had its prompt computed before this one arrived (ready_s[i]: request i's arrival + TTFT, on the
// workload's clock; +inf when it never was). A later turn sent while its previous turn is still in
// prefill cannot hit that turn, whatever the placement: this is the most any policy could hit at the
// latencies the run had. REQUIRES: ready_s.size() == workload.size().
HitCeiling CausalHitCeiling(const std::vector<WorkloadRequest>& workload, const std::vector<double>& ready_s,
                            int unit_tokens);

}  // namespace ds41
