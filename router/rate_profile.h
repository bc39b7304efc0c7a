// RateProfile: how long a deployment's work takes — work per token and per step, sizes, budgets
// and bandwidths. The simulator (sim/) times its nodes with it, and the router's cost model can take
// its rates (CostModelFromProfile, router --cost-profile), so both reason with the same numbers.
// Written by `ds41-sim calibrate` (measured on a running cluster) or by hand from published figures
// (sim/profiles/). The file is JSON; // comments are allowed and every field is optional (missing
// ones keep the defaults below). Every *_s field is seconds of one thread's work at full speed
// (CPU-seconds with nothing else running): the simulator's host model (sim/host_cpu.h) turns them
// into wall time under sharing, so contention is simulated, not baked into the rates.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "router/placement.h"
#include "util/status.h"

namespace ds41 {

struct EncoderRates {
  int64_t step_tokens = 512;       // token budget of one shared step (encoder --step-tokens)
  double step_s = 0;               // fixed work of one step
  // Computing positions [p0, p1) costs token_s*(p1-p0) + token_context_s*(p1^2 - p0^2): a token at
  // position p costs token_s + 2*token_context_s*p (its attention over what precedes it).
  double token_s = 7.7e-4;
  double token_context_s = 3.75e-8;
  double replay_token_s = 7.7e-4;  // encoder replay (SWA state rebuilt over up to `window` tokens)
  double load_token_s = 0;         // reading a cached prefix token (unit decode), before the steps
  uint64_t swa_pool_bytes = 2ull << 30;
  double swa_ttl_s = 600;
};

struct DecoderRates {
  int max_running = 64;              // decoder --max-running
  // One decode step of a batch: step_s + step_seq_s * sequences + step_context_s * (sum of their
  // context lengths).
  double step_s = 0.01;
  double step_seq_s = 0.002;
  double step_context_s = 0;
  double replay_token_s = 1e-3;      // decoder replay over the last `window` prompt tokens
  double load_token_s = 0;           // reading a cached prefix token from the store (unit decode)
  uint64_t session_bytes = 8ull << 30;  // warm sessions kept within this (decoder --session-bytes)
  double session_ttl_s = 900;
  double state_bytes_per_token = 890;   // RAM of a sequence's global KV per context token
  uint64_t state_fixed_bytes = 1300000; // a sequence's SWA rings and the rest
  uint64_t swa_pool_bytes = 2ull << 30;
  double swa_ttl_s = 900;
};

struct StoreRates {
  uint64_t capacity_bytes = 64ull << 30;  // cache_service --capacity (all shards together)
  double ttl_s = 72 * 3600;               // idle units expire (cache_service --ttl-hours)
  int shards = 1;
  double shard_bytes_per_s = 1e9;         // one shard's read+write bandwidth (a FIFO per shard)
};

struct NetworkRates {
  double link_bytes_per_s = 1.25e9;  // one node's link (store reads, KV handoff, SWA state fetch)
  double latency_s = 0;              // added to each transfer
};

struct RateProfile {
  std::string name = "default";
  std::string source;              // how the numbers were obtained
  int host_cores = 0;              // 0: every node its own hardware; c > 0: all nodes share c cores
  int window = 128;                // replay span (the model's sliding window)
  double kv_bytes_per_token = 890; // unit payload per token
  double request_overhead_s = 0.005;  // router, HTTP and RPC time of a request: a delay before placement
  uint64_t swa_state_bytes = 1300000; // one SWA state (peer fetch size, pool entry)
  uint64_t node_cache_bytes = 8ull << 30;  // per-node cache scope: each encoder's own cache
  EncoderRates encoder;
  DecoderRates decoder;
  StoreRates store;
  NetworkRates network;

  // Prefill work of positions [p0, p1) on an encoder (no step overhead).
  double EncodeWork(int64_t p0, int64_t p1) const {
    const double a = static_cast<double>(p0), b = static_cast<double>(p1);
    return encoder.token_s * (b - a) + encoder.token_context_s * (b * b - a * a);
  }
  double StepWork(int64_t sequences, int64_t context_tokens) const {
    return decoder.step_s + decoder.step_seq_s * static_cast<double>(sequences) +
           decoder.step_context_s * static_cast<double>(context_tokens);
  }

  // InvalidArgument naming the first field out of range.
  Status Validate() const;
};

nlohmann::json RateProfileJson(const RateProfile& p);
// Missing fields keep their defaults; a field of the wrong type is InvalidArgument naming it.
StatusOr<RateProfile> RateProfileFromJson(const nlohmann::json& j);
// Reads a profile file (JSON with // comments), validated.
StatusOr<RateProfile> ReadRateProfile(const std::string& path);
// Writes `p` with `header` (lines, each written as a // comment) above it.
Status WriteRateProfile(const std::string& path, const RateProfile& p, const std::string& header);

// The router's cost model with the profile's rates: prefill, replay and prefix load per token, the
// decode step and its growth per sequence, the running limit. The tie margins keep their defaults.
CostModel CostModelFromProfile(const RateProfile& p);

}  // namespace ds41
