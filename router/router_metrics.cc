#include "router/router_metrics.h"

namespace ds41 {
namespace {

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

prometheus::Histogram::BucketBoundaries ErrorBuckets() {
  return {-10, -2, -1, -0.5, -0.2, -0.1, -0.05, -0.01, 0, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 10};
}

}  // namespace

const char* HitClass(int64_t prompt_tokens, int64_t cached_tokens) {
  if (cached_tokens <= 0) return "cold";
  return cached_tokens * 10 >= prompt_tokens * 9 ? "full" : "partial";
}

RouterMetrics::RouterMetrics(prometheus::Registry& r)
    : running(prometheus::BuildGauge().Name("ds41_router_running_requests").Help("Requests in flight").Register(r).Add({})),
      sessions_bound(prometheus::BuildGauge()
                         .Name("ds41_router_sessions_bound")
                         .Help("Sessions whose last turn's nodes the router remembers (SWA state placement)")
                         .Register(r)
                         .Add({})),
      sessions_limit(prometheus::BuildGauge()
                         .Name("ds41_router_sessions_bound_limit")
                         .Help("Most sessions remembered (--max-sessions); the least recently bound go first")
                         .Register(r)
                         .Add({})),
      requests_(prometheus::BuildCounter().Name("ds41_router_requests_total").Help("Requests by endpoint and HTTP status").Register(r)),
      rejections_(prometheus::BuildCounter().Name("ds41_router_rejections_total").Help("Requests refused, by reason").Register(r)),
      cancelled_(prometheus::BuildCounter()
                     .Name("ds41_router_requests_cancelled_total")
                     .Help("Requests stopped because nobody waits: client gone, deadline passed, shutdown")
                     .Register(r)),
      placements_(prometheus::BuildCounter()
                      .Name("ds41_router_placement_decisions_total")
                      .Help("Placement decisions by policy and reason")
                      .Register(r)),
      ttft_(prometheus::BuildHistogram().Name("ds41_router_ttft_seconds").Help("Time to first token by hit class").Register(r)),
      inter_token_(prometheus::BuildHistogram()
                       .Name("ds41_router_inter_token_seconds")
                       .Help("Time between streamed tokens by hit class")
                       .Register(r)),
      e2e_(prometheus::BuildHistogram().Name("ds41_router_e2e_seconds").Help("Request latency by hit class").Register(r)),
      prediction_error_(prometheus::BuildHistogram()
                            .Name("ds41_router_ttft_prediction_error_seconds")
                            .Help("Observed minus predicted time to first token")
                            .Register(r)
                            .Add({}, ErrorBuckets())),
      prompt_tokens_(prometheus::BuildCounter()
                         .Name("ds41_router_prompt_tokens_total")
                         .Help("Prompt tokens by kind: hit (cache or warm session) or miss")
                         .Register(r)),
      completion_tokens_(prometheus::BuildCounter()
                             .Name("ds41_router_completion_tokens_total")
                             .Help("Generated tokens")
                             .Register(r)
                             .Add({})),
      migrations_(prometheus::BuildCounter()
                      .Name("ds41_router_migrations_total")
                      .Help("Requests resumed on another decoder after theirs died mid-stream, by outcome")
                      .Register(r)),
      migration_stall_(prometheus::BuildHistogram()
                           .Name("ds41_router_migration_stall_seconds")
                           .Help("Time a client's stream stood still for a migration (last token before to first after)")
                           .Register(r)
                           .Add({}, LatencyBuckets())),
      nodes_(prometheus::BuildGauge().Name("ds41_router_nodes").Help("Known nodes by role and state").Register(r)),
      reply_lookups_(prometheus::BuildCounter()
                         .Name("ds41_router_reply_splices_total")
                         .Help("Assistant messages sent back: generated ids spliced in, or rendered as sent (no or bad record)")
                         .Register(r)),
      reply_spliced_tokens_(prometheus::BuildCounter()
                                .Name("ds41_router_reply_spliced_tokens_total")
                                .Help("Prompt tokens taken from reply records instead of re-tokenized text")
                                .Register(r)
                                .Add({})),
      reply_records_(prometheus::BuildCounter()
                         .Name("ds41_router_reply_records_total")
                         .Help("Chat replies whose generated ids were recorded in the store, by outcome")
                         .Register(r)) {
  // Every reason exists from the start at 0: rate() and increase() see the first rejection, and
  // dashboards show 0 rather than "no data".
  for (const char* reason : kRejectionReasons) rejections_.Add({{"reason", reason}});
  for (CancelReason reason : kCancelReasons) cancelled_.Add({{"reason", CancelReasonName(reason)}});
  for (const char* outcome : kMigrationOutcomes) migrations_.Add({{"outcome", outcome}});
  for (const char* outcome : {"spliced", "not_found", "invalid"}) reply_lookups_.Add({{"outcome", outcome}});
  for (const char* outcome : {"stored", "failed"}) reply_records_.Add({{"outcome", outcome}});
}

void RouterMetrics::Request(const std::string& endpoint, int code) {
  requests_.Add({{"endpoint", endpoint}, {"code", std::to_string(code)}}).Increment();
}
void RouterMetrics::Rejection(const char* reason) { rejections_.Add({{"reason", reason}}).Increment(); }
void RouterMetrics::Cancelled(CancelReason reason) { cancelled_.Add({{"reason", CancelReasonName(reason)}}).Increment(); }
void RouterMetrics::Placement(const char* policy, const std::string& reason) {
  placements_.Add({{"policy", policy}, {"reason", reason}}).Increment();
}
void RouterMetrics::Ttft(const char* hit_class, double s, double predicted) {
  ttft_.Add({{"hit_class", hit_class}}, LatencyBuckets()).Observe(s);
  prediction_error_.Observe(s - predicted);
}
void RouterMetrics::InterToken(const char* hit_class, double s) {
  inter_token_.Add({{"hit_class", hit_class}}, LatencyBuckets()).Observe(s);
}
void RouterMetrics::EndToEnd(const char* hit_class, double s) {
  e2e_.Add({{"hit_class", hit_class}}, LatencyBuckets()).Observe(s);
}
void RouterMetrics::PromptTokens(int64_t hit, int64_t miss) {
  prompt_tokens_.Add({{"kind", "hit"}}).Increment(static_cast<double>(hit));
  prompt_tokens_.Add({{"kind", "miss"}}).Increment(static_cast<double>(miss));
}
void RouterMetrics::CompletionTokens(int64_t n) { completion_tokens_.Increment(static_cast<double>(n)); }
void RouterMetrics::ReplyLookup(const char* outcome) { reply_lookups_.Add({{"outcome", outcome}}).Increment(); }
void RouterMetrics::ReplySpliced(int64_t tokens) {
  reply_lookups_.Add({{"outcome", "spliced"}}).Increment();
  reply_spliced_tokens_.Increment(static_cast<double>(tokens));
}
void RouterMetrics::ReplyRecorded(const char* outcome) { reply_records_.Add({{"outcome", outcome}}).Increment(); }
void RouterMetrics::SetNodes(const std::string& role, const std::string& state, double n) {
  nodes_.Add({{"role", role}, {"state", state}}).Set(n);
}

void RouterMetrics::Migration(const char* outcome) { migrations_.Add({{"outcome", outcome}}).Increment(); }
void RouterMetrics::MigrationStall(double s) { migration_stall_.Observe(s); }

}  // namespace ds41
