#include "serving/node_metrics.h"

namespace ds41 {
namespace {

prometheus::Histogram::BucketBoundaries Seconds() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 0.001; v < 500; v *= 2) b.push_back(v);
  return b;
}

prometheus::Histogram::BucketBoundaries Tokens() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 1; v <= 1048576; v *= 4) b.push_back(v);
  return b;
}

}  // namespace

NodeMetrics::NodeMetrics(prometheus::Registry& r, const std::string& role)
    : requests(prometheus::BuildCounter().Name("ds41_" + role + "_requests_total").Help("Requests by outcome").Register(r)),
      requests_ok(requests.Add({{"status", "ok"}})),
      requests_invalid(requests.Add({{"status", "invalid"}})),
      requests_unavailable(requests.Add({{"status", "unavailable"}})),
      requests_cancelled(requests.Add({{"status", "cancelled"}})),
      requests_error(requests.Add({{"status", "error"}})),
      cancelled(prometheus::BuildCounter()
                    .Name("ds41_" + role + "_requests_cancelled_total")
                    .Help("Requests stopped because nobody waits: client gone, deadline passed, shutdown")
                    .Register(r)),
      queued_tokens(prometheus::BuildGauge().Name("ds41_" + role + "_queued_tokens").Help("Prompt tokens waiting to be computed").Register(r).Add({})),
      computed_tokens(prometheus::BuildCounter().Name("ds41_" + role + "_computed_tokens_total").Help("Prompt tokens computed, by kind").Register(r)),
      computed_new(computed_tokens.Add({{"kind", "new"}})),
      computed_replay(computed_tokens.Add({{"kind", "replay"}})),
      cached_tokens(prometheus::BuildCounter().Name("ds41_" + role + "_cached_tokens_total").Help("Prompt tokens whose KV was reused").Register(r).Add({})),
      prefill_seconds(prometheus::BuildHistogram().Name("ds41_" + role + "_prefill_seconds").Help("Prefill (encoder) or replay (decoder) time per request").Register(r).Add({}, Seconds())),
      decode_step_seconds(prometheus::BuildHistogram().Name("ds41_" + role + "_decode_step_seconds").Help("Time of one batched decode step").Register(r).Add({}, Seconds())),
      ttft_seconds(prometheus::BuildHistogram().Name("ds41_" + role + "_ttft_seconds").Help("Request arrival to first token").Register(r).Add({}, Seconds())),
      batch_tokens(prometheus::BuildHistogram().Name("ds41_" + role + "_batch_tokens").Help("Tokens per forward step").Register(r).Add({}, Tokens())),
      running(prometheus::BuildGauge().Name("ds41_" + role + "_running_sequences").Help("Sequences being computed").Register(r).Add({})),
      waiting(prometheus::BuildGauge().Name("ds41_" + role + "_waiting_requests").Help("Requests waiting for their prefill").Register(r).Add({})),
      resident(prometheus::BuildGauge().Name("ds41_" + role + "_resident_bytes").Help("Resident bytes by kind").Register(r)),
      resident_sessions(resident.Add({{"kind", "sessions"}})),
      resident_running(resident.Add({{"kind", "running"}})),
      resident_swa(resident.Add({{"kind", "swa_pool"}})),
      resident_experts(resident.Add({{"kind", "expert_cache"}})),
      expert_hits(prometheus::BuildCounter().Name("ds41_" + role + "_expert_cache_hits_total").Help("Routed-expert lookups served by the cache").Register(r).Add({})),
      expert_misses(prometheus::BuildCounter().Name("ds41_" + role + "_expert_cache_misses_total").Help("Routed experts paged in").Register(r).Add({})),
      kv_bytes(prometheus::BuildCounter().Name("ds41_" + role + "_kv_transfer_bytes_total").Help("Global KV and SWA bytes moved, by direction").Register(r)),
      kv_bytes_in(kv_bytes.Add({{"direction", "in"}})),
      kv_bytes_out(kv_bytes.Add({{"direction", "out"}})),
      kv_transfer_seconds(prometheus::BuildHistogram().Name("ds41_" + role + "_kv_transfer_seconds").Help("Time to fetch prefix KV").Register(r).Add({}, Seconds())),
      swa(prometheus::BuildCounter().Name("ds41_" + role + "_swa_state_total").Help("Where the SWA state at the cached prefix came from").Register(r)),
      swa_local(swa.Add({{"source", "local"}})),
      swa_peer(swa.Add({{"source", "peer"}})),
      swa_replay(swa.Add({{"source", "replay"}})),
      swa_warm(swa.Add({{"source", "warm"}})),
      swa_none(swa.Add({{"source", "none"}})),
      generated_tokens(prometheus::BuildCounter().Name("ds41_" + role + "_generated_tokens_total").Help("Tokens generated").Register(r).Add({})),
      images_encoded(prometheus::BuildCounter().Name("ds41_" + role + "_images_encoded_total").Help("Images through the vision tower (each once per request that computes its rows)").Register(r).Add({})),
      units_put(prometheus::BuildCounter().Name("ds41_" + role + "_units_put_total").Help("Units written to the store, by whether it acknowledged them").Register(r)),
      units_put_ok(units_put.Add({{"status", "ok"}})),
      units_put_error(units_put.Add({{"status", "error"}})) {
  for (CancelReason reason : kCancelReasons) cancelled.Add({{"reason", CancelReasonName(reason)}});
}

SpeculationMetrics::SpeculationMetrics(prometheus::Registry& r)
    : drafted_tokens(prometheus::BuildCounter().Name("ds41_decoder_spec_drafted_tokens_total").Help("Drafted tokens sent to verification").Register(r).Add({})),
      accepted_tokens(prometheus::BuildCounter().Name("ds41_decoder_spec_accepted_tokens_total").Help("Drafted tokens the verification accepted").Register(r).Add({})),
      verify_length(prometheus::BuildHistogram().Name("ds41_decoder_spec_verify_length").Help("Drafted tokens verified per step, as the scheduler chose (0: plain decode)").Register(r)
                        .Add({}, prometheus::Histogram::BucketBoundaries{0, 1, 2, 3, 4, 5, 6, 7})),
      position_verified(prometheus::BuildCounter().Name("ds41_decoder_spec_position_verified_total").Help("Drafted tokens verified, by position in the block").Register(r)),
      position_accepted(prometheus::BuildCounter().Name("ds41_decoder_spec_position_accepted_total").Help("Drafted tokens accepted, by position in the block").Register(r)),
      steps(prometheus::BuildCounter().Name("ds41_decoder_spec_steps_total").Help("Decode steps of the speculative decoder, by whether they drafted (false: the recent acceptance could not pay for a draft at that batch)").Register(r)),
      drafted_steps(steps.Add({{"drafted", "true"}})),
      plain_steps(steps.Add({{"drafted", "false"}})) {
  for (int i = 1; i <= kPositions; ++i) {
    verified_at_.push_back(&position_verified.Add({{"position", std::to_string(i)}}));
    accepted_at_.push_back(&position_accepted.Add({{"position", std::to_string(i)}}));
  }
}

void SpeculationMetrics::CountStep(int verified, int accepted) {
  drafted_tokens.Increment(verified);
  accepted_tokens.Increment(accepted);
  // A block longer than kPositions still counts, through its label set.
  auto at = [](const std::vector<prometheus::Counter*>& resolved, prometheus::Family<prometheus::Counter>& family,
               int j) -> prometheus::Counter& {
    return j <= kPositions ? *resolved[static_cast<size_t>(j - 1)] : family.Add({{"position", std::to_string(j)}});
  };
  for (int j = 1; j <= verified; ++j) {
    at(verified_at_, position_verified, j).Increment();
    if (j <= accepted) at(accepted_at_, position_accepted, j).Increment();
  }
}

void NodeMetrics::CountCancelled(CancelReason reason) {
  requests_cancelled.Increment();
  cancelled.Add({{"reason", CancelReasonName(reason)}}).Increment();
}

void NodeMetrics::CountOutcome(const Status& s, CancelReason reason) {
  switch (s.code()) {
    case StatusCode::kOk: requests_ok.Increment(); break;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition: requests_invalid.Increment(); break;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded: requests_unavailable.Increment(); break;
    case StatusCode::kCancelled: CountCancelled(reason); break;
    default: requests_error.Increment(); break;
  }
}

}  // namespace ds41
