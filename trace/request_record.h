// RequestRecord: what happened to one workload request, as the replay measured it against a real
// cluster or the simulator computed it; one JSON object a line in a record file (JSONL).
//
// A record file may start with one header line, an object with the key "run" (the run's label,
// options and prefix-hit ceiling: trace/run_header.h); readers hand it back apart from the records.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "trace/workload.h"
#include "util/status.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41 {

// RequestRecord::outcome values.
inline constexpr std::string_view kOutcomeOk = "ok";
inline constexpr std::string_view kOutcomeRejected = "rejected";  // HTTP 429/503: the router's admission
inline constexpr std::string_view kOutcomeFailed = "failed";      // any other error
inline constexpr std::string_view kOutcomeTimeout = "timeout";    // past the deadline: abandoned

struct RequestRecord {
  int64_t index = 0;            // WorkloadRequest::index
  std::string session;
  double arrival_s = 0;         // scheduled arrival, from the run's start
  double start_s = -1;          // when it was sent (>= arrival_s when every slot was busy); -1: never
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;    // the target (max_tokens)
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;    // prompt tokens whose KV was reused (usage.prompt_cache_hit_tokens)
  int64_t computed_tokens = 0;  // prompt tokens the encoder computed
  int64_t encoder_replay_tokens = 0, decoder_replay_tokens = 0;
  // Bytes of prefix KV the decoder fetched from the store: cached_tokens * 890 unless the decoder
  // held the session warm (prefix_source "warm"), then 0.
  int64_t kv_bytes_read = 0;
  std::string prefix_source;    // "warm" | "cache" | "none", as usage.ds41 reports it
  // From the scheduled arrival, so time spent waiting for a free client slot counts (no coordinated
  // omission). -1 when no token came.
  double ttft_s = -1;
  double e2e_s = -1;            // arrival to the last byte (or to the give-up)
  // The router's placement predicted this much time to the first token (usage.ds41), and measured
  // this much from its own receipt of the request; -1 when not reported.
  double predicted_ttft_s = -1;
  double router_ttft_s = -1;
  // Every inter-token gap; a chunk carrying k tokens contributes k gaps of (its gap / k).
  std::vector<double> itl_s;
  std::string decoder, encoder, placement_reason;
  std::string outcome = std::string(kOutcomeOk);  // kOutcome*
  int http_status = 0;          // 0: no response
  std::string error;

  bool ok() const { return outcome == kOutcomeOk; }
};

// A record of `w` before it is sent: what the workload says of it (index, session, scheduled
// arrival, prompt and output lengths); the replay and the simulator fill in the rest.
RequestRecord RecordOf(const WorkloadRequest& w);

// The decoder's store read for a prefix: cached_tokens * 890 bytes (the unit format's payload per
// token, docs/unit_format.md) unless prefix_source is "warm".
int64_t KvBytesRead(int64_t cached_tokens, std::string_view prefix_source);

nlohmann::json RecordJson(const RequestRecord& r);
// One line of JSON, without the newline.
std::string ToJsonLine(const RequestRecord& r);
// A record from RecordJson's form; missing fields keep their defaults, a field of the wrong type
// is InvalidArgument naming it.
StatusOr<RequestRecord> RecordFromJson(const nlohmann::json& j);
StatusOr<RequestRecord> ParseRecord(std::string_view line);

// A record file's content.
struct RecordFile {
  nlohmann::json header;  // the "run" object of the header line; null when there is none
  std::vector<RequestRecord> records;
};

// Reads a record file; blank lines are skipped. NotFound when it cannot be opened, InvalidArgument
// naming the line for one that does not parse.
StatusOr<RecordFile> ReadRecordFile(const std::string& path);
// Writes `records` (after a header line when `header` is not null), replacing the file.
Status WriteRecordFile(const std::string& path, const std::vector<RequestRecord>& records,
                       const nlohmann::json& header = nullptr);

// Appends records to a file as they finish, each flushed at once (a run cut short keeps what it
// measured). Thread-safe: Append may be called from any thread.
class RecordWriter {
 public:
  // Creates or truncates `path` and writes the header line when `header` is not null.
  static StatusOr<std::unique_ptr<RecordWriter>> Open(const std::string& path, const nlohmann::json& header = nullptr);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  Status Append(const RequestRecord& r) DS41_EXCLUDES(mu_);
  Status Close() DS41_EXCLUDES(mu_);

 private:
  RecordWriter(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}
  Mutex mu_;
  std::FILE* f_ DS41_GUARDED_BY(mu_);
  const std::string path_;
};

}  // namespace ds41
