// Replaying a workload through a cluster's public OpenAI API, as clients would: each request is a
// streamed POST /v1/completions with the prompt as token ids (WorkloadTokens), exactly its
// output_tokens generated (ignore_eos), greedy, and its session in x-session-id; every chunk is
// timed and the final usage chunk read into a RequestRecord. (Greedy and ignore_eos are defaults;
// ReplayOptions can change both.)
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trace/http_stream_client.h"
#include "trace/request_record.h"
#include "trace/workload.h"
#include "util/status.h"

namespace ds41 {

struct ReplayOptions {
  std::string endpoint = "http://127.0.0.1:8000";  // with or without the trailing /v1
  std::string api_key = {};                        // sent as "Authorization: Bearer KEY" when set
  std::string model = "deepseek-v4.1-flash";
  int concurrency = 64;     // requests in flight at most; a request finding all busy waits its turn
  double deadline_s = 60;   // from the scheduled arrival: past it the request is abandoned (timeout)
  // Prompt token ids are drawn from [min_token_id, vocab): above the special tokens and inside the
  // model's vocabulary (the small checkpoint's: 4096).
  int32_t min_token_id = 16;
  int32_t vocab = 4096;
  // Sampling: greedy by default; with temperature > 0 every request carries `seed`, so a run is
  // repeatable.
  double temperature = 0;
  int64_t seed = 0;
  // Send vLLM's ignore_eos so each reply has exactly its trace length; off for servers without it
  // (then EOS may end replies early).
  bool ignore_eos = true;
  bool progress = true;     // a progress line on stderr every 10 s

  // InvalidArgument naming the option that is out of range.
  Status Validate() const;
};

// Sends requests of a workload. Thread-safe: Send may be called from many threads at once.
class ReplayClient {
 public:
  // InvalidArgument for bad options or endpoint.
  static StatusOr<std::unique_ptr<ReplayClient>> Create(const ReplayOptions& options);

  // One tiny request (2 prompt tokens: min_token_id and vocab - 1; 1 output token) that checks the
  // endpoint, the model, the key and the token range before a run. The error says what to change.
  Status Probe();

  // Sends `w` at once (the caller waits for its arrival) and returns its record; `run_start` is
  // the run's time 0, from which arrival_s counts. Never fails: errors are the record's outcome.
  RequestRecord Send(const WorkloadRequest& w, std::chrono::steady_clock::time_point run_start);

  // The request body for `w` (exposed for tests).
  std::string Body(const WorkloadRequest& w) const;

 private:
  ReplayClient(ReplayOptions options, HttpUrl url) : options_(std::move(options)), http_(std::move(url)) {}
  void AddSampling(nlohmann::json* body) const;  // temperature, seed, ignore_eos
  HttpCall Call(std::string body, const std::string& session, std::chrono::steady_clock::time_point deadline) const;

  const ReplayOptions options_;
  HttpStreamClient http_;
};

// Plays `workload`: one scheduler (the calling thread) releases each request at its arrival to a
// fixed pool of options.concurrency threads; each record is appended to `out` as it finishes (out
// may be null). Returns the records in workload order; fails only when `out` cannot be written.
StatusOr<std::vector<RequestRecord>> RunReplay(ReplayClient& client, const std::vector<WorkloadRequest>& workload,
                                               const ReplayOptions& options, RecordWriter* out);

}  // namespace ds41
