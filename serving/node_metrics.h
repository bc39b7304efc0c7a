// NodeMetrics: the Prometheus metrics of an encoder or decoder node (SERVING.md §7, ANCHORS.md §16),
// named ds41_<role>_... with base units in the names and no per-request labels. Thread-safe
// (prometheus-cpp's metrics are).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>
#include <vector>

#include "util/cancel_token.h"
#include "util/status.h"

namespace ds41 {

struct NodeMetrics {
  NodeMetrics(prometheus::Registry& registry, const std::string& role);

  // Counts one request's outcome (requests_total{status}), the same way in every role: OK -> ok,
  // INVALID_ARGUMENT / FAILED_PRECONDITION -> invalid, UNAVAILABLE / DEADLINE_EXCEEDED -> unavailable,
  // CANCELLED -> cancelled (and requests_cancelled_total{reason}), anything else -> error.
  void CountOutcome(const Status& s, CancelReason reason = CancelReason::kClient);
  void CountCancelled(CancelReason reason);

  prometheus::Family<prometheus::Counter>& requests;  // status: ok | invalid | unavailable | cancelled | error
  prometheus::Counter& requests_ok;
  prometheus::Counter& requests_invalid;
  prometheus::Counter& requests_unavailable;
  prometheus::Counter& requests_cancelled;
  prometheus::Counter& requests_error;
  prometheus::Family<prometheus::Counter>& cancelled;  // reason: client | deadline | shutdown
  prometheus::Gauge& queued_tokens;
  prometheus::Family<prometheus::Counter>& computed_tokens;  // kind: new | replay
  prometheus::Counter& computed_new;
  prometheus::Counter& computed_replay;
  prometheus::Counter& cached_tokens;          // prompt tokens whose KV came from the cache or a warm session
  prometheus::Histogram& prefill_seconds;      // encoder: per prefill; decoder: replay per request
  prometheus::Histogram& decode_step_seconds;  // decoder
  prometheus::Histogram& ttft_seconds;         // decoder
  prometheus::Histogram& batch_tokens;         // tokens per forward step
  prometheus::Gauge& running;
  prometheus::Gauge& waiting;
  prometheus::Family<prometheus::Gauge>& resident;  // kind: sessions | running | swa_pool | expert_cache
  prometheus::Gauge& resident_sessions;
  prometheus::Gauge& resident_running;
  prometheus::Gauge& resident_swa;
  prometheus::Gauge& resident_experts;
  prometheus::Counter& expert_hits;
  prometheus::Counter& expert_misses;
  prometheus::Family<prometheus::Counter>& kv_bytes;  // direction: in | out
  prometheus::Counter& kv_bytes_in;
  prometheus::Counter& kv_bytes_out;
  prometheus::Histogram& kv_transfer_seconds;
  prometheus::Family<prometheus::Counter>& swa;  // source: local | peer | replay | warm | none
  prometheus::Counter& swa_local;
  prometheus::Counter& swa_peer;
  prometheus::Counter& swa_replay;
  prometheus::Counter& swa_warm;
  prometheus::Counter& swa_none;
  prometheus::Counter& generated_tokens;       // decoder
  prometheus::Counter& images_encoded;         // images through the vision tower (serving/engine_prompt.h)
  prometheus::Family<prometheus::Counter>& units_put;  // status: ok | error (units the store took or refused)
  prometheus::Counter& units_put_ok;
  prometheus::Counter& units_put_error;
};

// A decoder's speculative decoding (engine/speculation.h), ds41_decoder_spec_...: registered by
// every decoder, counting only when it runs with --speculative. Thread-safe.
struct SpeculationMetrics {
  // Draft positions counted by position label (1 = the first drafted token).
  static constexpr int kPositions = 8;
  explicit SpeculationMetrics(prometheus::Registry& registry);

  prometheus::Counter& drafted_tokens;    // drafted tokens sent to verification
  prometheus::Counter& accepted_tokens;   // of those, accepted
  prometheus::Histogram& verify_length;   // k chosen per step (0: plain decode)
  prometheus::Family<prometheus::Counter>& position_verified;  // position: 1..kPositions
  prometheus::Family<prometheus::Counter>& position_accepted;  // position: 1..kPositions
  prometheus::Family<prometheus::Counter>& steps;  // drafted: true | false (skipped: drafting could not pay)
  prometheus::Counter& drafted_steps;
  prometheus::Counter& plain_steps;

  // One sequence's step: `verified` drafts checked, the first `accepted` of them kept.
  void CountStep(int verified, int accepted);

 private:
  // The position counters resolved once, [kPositions]: a step counts without building label sets.
  std::vector<prometheus::Counter*> verified_at_, accepted_at_;
};

}  // namespace ds41
