// RouterMetrics: the front door's Prometheus metrics (SERVING.md §7), ds41_router_*. Latencies are
// split by hit class (cold: nothing cached; partial: under 90% of the prompt cached; full: 90% or
// more), never by request. Thread-safe (prometheus-cpp's metrics are).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>

#include "util/cancel_token.h"

namespace ds41 {

const char* HitClass(int64_t prompt_tokens, int64_t cached_tokens);

// Why the router refused a request: too many in flight or a predicted wait behind queued work over
// --max-queue-seconds (429), no healthy node of a role, every decoder at its sequence limit (503),
// its deadline passed or predicted to pass before the first token (504).
inline constexpr const char* kRejectionReasons[] = {"overloaded", "queue", "no_nodes", "decoders_full", "deadline"};

// What became of a request migration (a decoder died after streaming part of a reply): the resumed
// attempt finished the reply, failed too (another migration may follow), was cancelled (client gone,
// deadline), or none could be made (limit reached, no decoder left, deadline passed).
inline constexpr const char* kMigrationOutcomes[] = {"completed", "failed", "cancelled", "refused"};

class RouterMetrics {
 public:
  explicit RouterMetrics(prometheus::Registry& registry);

  void Request(const std::string& endpoint, int http_code);
  void Rejection(const char* reason);  // one of kRejectionReasons
  void Cancelled(CancelReason reason);  // a request stopped because nobody waits for it any more
  void Placement(const char* policy, const std::string& reason);
  void Ttft(const char* hit_class, double seconds, double predicted_seconds);
  void InterToken(const char* hit_class, double seconds);
  void EndToEnd(const char* hit_class, double seconds);
  void PromptTokens(int64_t hit, int64_t miss);
  void CompletionTokens(int64_t n);
  void Migration(const char* outcome);  // one of kMigrationOutcomes
  // The client's stream stood still this long for a migration: from the last token before the
  // decoder failed to the first one after.
  void MigrationStall(double seconds);
  void SetNodes(const std::string& role, const std::string& state, double n);
  // Session reuse over chat (docs/session_reuse.md): an assistant message sent back either had its
  // generated ids spliced in ("spliced", with their count) or rendered as sent ("not_found": no
  // record; "invalid": a record that failed its checks); a finished chat reply's record was
  // "stored" or "failed".
  void ReplyLookup(const char* outcome);
  void ReplySpliced(int64_t tokens);
  void ReplyRecorded(const char* outcome);
  prometheus::Gauge& running;
  prometheus::Gauge& sessions_bound;  // sessions whose nodes the router remembers (SessionBindings)
  prometheus::Gauge& sessions_limit;  // --max-sessions: the least recently bound beyond it are dropped

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Family<prometheus::Counter>& cancelled_;
  prometheus::Family<prometheus::Counter>& placements_;
  prometheus::Family<prometheus::Histogram>& ttft_;
  prometheus::Family<prometheus::Histogram>& inter_token_;
  prometheus::Family<prometheus::Histogram>& e2e_;
  prometheus::Histogram& prediction_error_;
  prometheus::Family<prometheus::Counter>& prompt_tokens_;
  prometheus::Counter& completion_tokens_;
  prometheus::Family<prometheus::Counter>& migrations_;
  prometheus::Histogram& migration_stall_;
  prometheus::Family<prometheus::Gauge>& nodes_;
  prometheus::Family<prometheus::Counter>& reply_lookups_;
  prometheus::Counter& reply_spliced_tokens_;
  prometheus::Family<prometheus::Counter>& reply_records_;
};

}  // namespace ds41
