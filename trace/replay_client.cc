#include "trace/replay_client.h"

#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "trace/sse_parser.h"
#include "trace/token_timing.h"
#include "util/mutex.h"
#include "util/thread_pool.h"

namespace ds41 {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
Clock::duration Duration(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

// The message of an OpenAI-shaped error body, else the body itself (shortened).
std::string ErrorMessage(const std::string& body) {
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string()) {
    return j["error"]["message"].get<std::string>();
  }
  return body.substr(0, 300);
}

int64_t Int(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}
std::string Str(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
double Num(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : -1;
}

// What one streamed reply showed: text chunk batches, the usage chunk, an error event.
struct StreamState {
  SseParser sse;
  std::vector<ChunkBatch> batches;
  Json usage;               // null until the final chunk
  double usage_t = -1;      // when the usage chunk came
  std::string error;        // an error event's message
  bool bad_json = false;

  void Event(std::string_view data, double t) {
    if (data == "[DONE]") return;
    const Json j = Json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      bad_json = true;
      return;
    }
    if (j.contains("error")) {
      error = j["error"].is_object() ? Str(j["error"], "message") : j["error"].dump();
      if (error.empty()) error = j.dump();
      return;
    }
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
      const Json& c = j["choices"][0];
      if (c.is_object() && c.contains("text") && c["text"].is_string() && !c["text"].get_ref<const std::string&>().empty()) {
        if (!batches.empty() && batches.back().t_s == t) {
          ++batches.back().chunks;
        } else {
          batches.push_back({t, 1});
        }
      }
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      usage = j["usage"];
      usage_t = t;
    }
  }
};

}  // namespace

Status ReplayOptions::Validate() const {
  if (concurrency < 1 || concurrency > 100000) return InvalidArgumentError("--concurrency must be in [1, 100000]");
  if (!(deadline_s > 0)) return InvalidArgumentError("--deadline must be positive");
  if (min_token_id < 0 || vocab <= min_token_id) return InvalidArgumentError("token ids: need 0 <= --min-token-id < --vocab");
  if (model.empty()) return InvalidArgumentError("--model must not be empty");
  if (!(temperature >= 0 && temperature <= 2)) return InvalidArgumentError("--temperature must be in [0, 2]");
  return ParseHttpUrl(endpoint).status();
}

StatusOr<std::unique_ptr<ReplayClient>> ReplayClient::Create(const ReplayOptions& options) {
  DS41_RETURN_IF_ERROR(options.Validate());
  DS41_ASSIGN_OR_RETURN(HttpUrl url, ParseHttpUrl(options.endpoint));
  // The API's paths are /v1/...; an endpoint given as ".../v1" (as OpenAI clients take it) means the same.
  if (url.prefix.size() >= 3 && url.prefix.compare(url.prefix.size() - 3, 3, "/v1") == 0) {
    url.prefix.resize(url.prefix.size() - 3);
  }
  return std::unique_ptr<ReplayClient>(new ReplayClient(options, std::move(url)));
}

std::string ReplayClient::Body(const WorkloadRequest& w) const {
  Json body = {{"model", options_.model},
               {"prompt", WorkloadTokens(w, options_.min_token_id, options_.vocab)},
               {"max_tokens", w.output_tokens},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  AddSampling(&body);
  return body.dump();
}

void ReplayClient::AddSampling(Json* body) const {
  (*body)["temperature"] = options_.temperature;
  if (options_.temperature > 0) (*body)["seed"] = options_.seed;
  if (options_.ignore_eos) (*body)["ignore_eos"] = true;
}

HttpCall ReplayClient::Call(std::string body, const std::string& session, Clock::time_point deadline) const {
  HttpCall call;
  call.method = "POST";
  call.path = "/v1/completions";
  call.body = std::move(body);
  call.headers = {{"Content-Type", "application/json"}};
  if (!session.empty()) call.headers.emplace_back("x-session-id", session);
  if (!options_.api_key.empty()) call.headers.emplace_back("Authorization", "Bearer " + options_.api_key);
  call.deadline = deadline;
  return call;
}

Status ReplayClient::Probe() {
  Json body = {{"model", options_.model}, {"prompt", {options_.min_token_id, options_.vocab - 1}}, {"max_tokens", 1}};
  AddSampling(&body);
  const std::string where = "the probe request to " + options_.endpoint;
  // A cluster just started may not see its nodes healthy yet (the router's first poll timed out
  // under load): 503 and 429 are asked again until the deadline, as clients retry them.
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  const auto pause = std::chrono::milliseconds(500);
  const HttpCall call = Call(body.dump(), "", deadline);
  auto send = [&] { return http_.Exchange(call, [](std::string_view, Clock::time_point) { return true; }); };
  StatusOr<HttpReply> reply = send();
  while (reply.ok() && (reply->status == 503 || reply->status == 429) && Clock::now() + pause < deadline) {
    std::this_thread::sleep_for(pause);
    reply = send();
  }
  if (!reply.ok()) return reply.status().Prefixed(where);
  if (reply->status == 200) return Status::Ok();
  const std::string msg = ErrorMessage(reply->body);
  const Json j = Json::parse(reply->body, nullptr, false);
  const std::string param = j.is_object() && j.contains("error") ? Str(j["error"], "param") : "";
  if (reply->status == 400 && param == "prompt") {
    return InvalidArgumentError(where + " was refused (" + msg + "): the server's vocabulary does not hold ids [" +
                                std::to_string(options_.min_token_id) + ", " + std::to_string(options_.vocab) +
                                "); pass its vocabulary size as --vocab");
  }
  if (reply->status == 400 && param == "ignore_eos") {
    return FailedPreconditionError(where + " was refused (" + msg + "): the server does not take ignore_eos");
  }
  return UnavailableError(where + " got HTTP " + std::to_string(reply->status) + ": " + msg);
}

RequestRecord ReplayClient::Send(const WorkloadRequest& w, Clock::time_point run_start) {
  RequestRecord r = RecordOf(w);
  const Clock::time_point deadline = run_start + Duration(w.arrival_s + options_.deadline_s);
  const Clock::time_point now = Clock::now();
  if (now >= deadline) {  // waited for a free slot past its deadline: never sent
    r.outcome = kOutcomeTimeout;
    r.error = "no free client slot before the deadline";
    r.e2e_s = options_.deadline_s;
    return r;
  }
  r.start_s = Seconds(now - run_start);

  StreamState st;
  auto reply = http_.Exchange(Call(Body(w), w.session, deadline), [&](std::string_view bytes, Clock::time_point t) {
    const double ts = Seconds(t - run_start);
    st.sse.Feed(bytes, [&](std::string_view data) { st.Event(data, ts); });
    return true;
  });
  r.e2e_s = Seconds(Clock::now() - run_start) - w.arrival_s;

  if (reply.ok()) r.http_status = reply->status;
  if (!reply.ok()) {
    r.outcome = reply.status().code() == StatusCode::kDeadlineExceeded ? kOutcomeTimeout : kOutcomeFailed;
    r.error = reply.status().message();
  } else if (reply->status == 429 || reply->status == 503) {
    r.outcome = kOutcomeRejected;
    r.error = ErrorMessage(reply->body);
  } else if (reply->status != 200) {
    r.outcome = kOutcomeFailed;
    r.error = ErrorMessage(reply->body);
  } else if (!st.error.empty()) {
    r.outcome = kOutcomeFailed;
    r.error = st.error;
  } else if (st.usage.is_null()) {
    r.outcome = kOutcomeFailed;
    r.error = st.bad_json ? "a stream event was not JSON" : "the stream ended without a usage chunk";
  }
  if (!st.usage.is_null()) {
    const Json& u = st.usage;
    const Json ds41 = u.contains("ds41") ? u["ds41"] : Json::object();
    r.completion_tokens = Int(u, "completion_tokens");
    r.cached_tokens = Int(u, "prompt_cache_hit_tokens");
    r.computed_tokens = Int(ds41, "computed_tokens");
    r.encoder_replay_tokens = Int(ds41, "encoder_replay_tokens");
    r.decoder_replay_tokens = Int(ds41, "decoder_replay_tokens");
    r.prefix_source = Str(ds41, "prefix_source");
    r.kv_bytes_read = KvBytesRead(r.cached_tokens, r.prefix_source);
    r.decoder = Str(ds41, "decoder");
    r.encoder = Str(ds41, "encoder");
    r.placement_reason = Str(ds41, "placement_reason");
    r.predicted_ttft_s = Num(ds41, "predicted_ttft_seconds");
    r.router_ttft_s = Num(ds41, "ttft_seconds");
  }
  // A reply whose every token was held back until the end shows no text chunk: its tokens came
  // with the final chunk.
  if (st.batches.empty() && st.usage_t >= 0 && r.completion_tokens > 0) st.batches.push_back({st.usage_t, 0});
  TimeTokens(st.batches, r.completion_tokens, w.arrival_s, &r);
  return r;
}

StatusOr<std::vector<RequestRecord>> RunReplay(ReplayClient& client, const std::vector<WorkloadRequest>& workload,
                                               const ReplayOptions& options, RecordWriter* out) {
  std::vector<RequestRecord> records(workload.size());
  Mutex mu;
  CondVar cv;
  size_t finished = 0;  // guarded by mu
  Status write_error;   // guarded by mu
  std::atomic<int64_t> started{0}, ok{0};
  ThreadPool pool(options.concurrency + 1, ThreadPool::Idle::kSleep, "replay");
  // A little ahead, so the first requests are not late while the pool's threads start.
  const Clock::time_point run_start = Clock::now() + std::chrono::milliseconds(200);
  Clock::time_point next_progress = run_start + std::chrono::seconds(10);

  auto progress = [&](size_t released) {
    if (!options.progress || Clock::now() < next_progress) return;
    next_progress += std::chrono::seconds(10);
    MutexLock l(&mu);
    std::fprintf(stderr, "replay: t=%.0f s, %zu of %zu released, %lld sent, %zu done (%lld ok), %lld in flight\n",
                 Seconds(Clock::now() - run_start), released, workload.size(), static_cast<long long>(started.load()),
                 finished, static_cast<long long>(ok.load()), static_cast<long long>(started.load()) - static_cast<long long>(finished));
  };

  for (size_t i = 0; i < workload.size(); ++i) {
    const Clock::time_point at = run_start + Duration(workload[i].arrival_s);
    // Sleep in slices so progress lines keep coming through long quiet stretches.
    while (Clock::now() < at) {
      std::this_thread::sleep_until(std::min(at, Clock::now() + std::chrono::seconds(1)));
      progress(i);
    }
    pool.Schedule([&, i] {
      ++started;
      RequestRecord r = client.Send(workload[i], run_start);
      if (r.ok()) ++ok;
      Status s = out != nullptr ? out->Append(r) : Status::Ok();
      MutexLock l(&mu);
      if (!s.ok() && write_error.ok()) write_error = s;
      records[i] = std::move(r);
      ++finished;
      cv.NotifyAll();
    });
  }
  for (;;) {
    {
      MutexLock l(&mu);
      if (cv.WaitFor(&mu, std::chrono::seconds(1), [&] { return finished == workload.size(); })) break;
    }
    progress(workload.size());
  }
  if (!write_error.ok()) return write_error;
  return records;
}

}  // namespace ds41
