#include "trace/request_record.h"

#include <fstream>

namespace ds41 {
namespace {

using Json = nlohmann::json;

// Reads j[key] into *out when present; the error names the field when its type is wrong.
template <typename T>
Status Read(const Json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  bool fits;
  if constexpr (std::is_same_v<T, std::string>) {
    fits = it->is_string();
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    fits = it->is_array();
    for (const Json& x : *it) fits = fits && x.is_number();
  } else if constexpr (std::is_floating_point_v<T>) {
    fits = it->is_number();
  } else {
    fits = it->is_number_integer();
  }
  if (!fits) return InvalidArgumentError(std::string("record field \"") + key + "\" has the wrong type");
  *out = it->get<T>();
  return Status::Ok();
}

}  // namespace

int64_t KvBytesRead(int64_t cached_tokens, std::string_view prefix_source) {
  return prefix_source == "warm" ? 0 : cached_tokens * 890;
}

Json RecordJson(const RequestRecord& r) {
  Json j;
  j["index"] = r.index;
  j["session"] = r.session;
  j["arrival_s"] = r.arrival_s;
  j["start_s"] = r.start_s;
  j["prompt_tokens"] = r.prompt_tokens;
  j["output_tokens"] = r.output_tokens;
  j["completion_tokens"] = r.completion_tokens;
  j["cached_tokens"] = r.cached_tokens;
  j["computed_tokens"] = r.computed_tokens;
  j["encoder_replay_tokens"] = r.encoder_replay_tokens;
  j["decoder_replay_tokens"] = r.decoder_replay_tokens;
  j["kv_bytes_read"] = r.kv_bytes_read;
  j["prefix_source"] = r.prefix_source;
  j["ttft_s"] = r.ttft_s;
  j["e2e_s"] = r.e2e_s;
  j["predicted_ttft_s"] = r.predicted_ttft_s;
  j["router_ttft_s"] = r.router_ttft_s;
  j["itl_s"] = r.itl_s;
  j["decoder"] = r.decoder;
  j["encoder"] = r.encoder;
  j["placement_reason"] = r.placement_reason;
  j["outcome"] = r.outcome;
  j["http_status"] = r.http_status;
  j["error"] = r.error;
  return j;
}

std::string ToJsonLine(const RequestRecord& r) {
  return RecordJson(r).dump(-1, ' ', false, Json::error_handler_t::replace);
}

StatusOr<RequestRecord> RecordFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgumentError("a record must be a JSON object");
  RequestRecord r;
  DS41_RETURN_IF_ERROR(Read(j, "index", &r.index));
  DS41_RETURN_IF_ERROR(Read(j, "session", &r.session));
  DS41_RETURN_IF_ERROR(Read(j, "arrival_s", &r.arrival_s));
  DS41_RETURN_IF_ERROR(Read(j, "start_s", &r.start_s));
  DS41_RETURN_IF_ERROR(Read(j, "prompt_tokens", &r.prompt_tokens));
  DS41_RETURN_IF_ERROR(Read(j, "output_tokens", &r.output_tokens));
  DS41_RETURN_IF_ERROR(Read(j, "completion_tokens", &r.completion_tokens));
  DS41_RETURN_IF_ERROR(Read(j, "cached_tokens", &r.cached_tokens));
  DS41_RETURN_IF_ERROR(Read(j, "computed_tokens", &r.computed_tokens));
  DS41_RETURN_IF_ERROR(Read(j, "encoder_replay_tokens", &r.encoder_replay_tokens));
  DS41_RETURN_IF_ERROR(Read(j, "decoder_replay_tokens", &r.decoder_replay_tokens));
  DS41_RETURN_IF_ERROR(Read(j, "kv_bytes_read", &r.kv_bytes_read));
  DS41_RETURN_IF_ERROR(Read(j, "prefix_source", &r.prefix_source));
  DS41_RETURN_IF_ERROR(Read(j, "ttft_s", &r.ttft_s));
  DS41_RETURN_IF_ERROR(Read(j, "e2e_s", &r.e2e_s));
  DS41_RETURN_IF_ERROR(Read(j, "predicted_ttft_s", &r.predicted_ttft_s));
  DS41_RETURN_IF_ERROR(Read(j, "router_ttft_s", &r.router_ttft_s));
  DS41_RETURN_IF_ERROR(Read(j, "itl_s", &r.itl_s));
  DS41_RETURN_IF_ERROR(Read(j, "decoder", &r.decoder));
  DS41_RETURN_IF_ERROR(Read(j, "encoder", &r.encoder));
  DS41_RETURN_IF_ERROR(Read(j, "placement_reason", &r.placement_reason));
  DS41_RETURN_IF_ERROR(Read(j, "outcome", &r.outcome));
  DS41_RETURN_IF_ERROR(Read(j, "http_status", &r.http_status));
  DS41_RETURN_IF_ERROR(Read(j, "error", &r.error));
  if (r.outcome != kOutcomeOk && r.outcome != kOutcomeRejected && r.outcome != kOutcomeFailed &&
      r.outcome != kOutcomeTimeout) {
    return InvalidArgumentError("record field \"outcome\" is \"" + r.outcome + "\", not ok, rejected, failed or timeout");
  }
  return r;
}

StatusOr<RequestRecord> ParseRecord(std::string_view line) {
  const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("a record line is not JSON");
  return RecordFromJson(j);
}

StatusOr<RecordFile> ReadRecordFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot open the record file " + path);
  RecordFile f;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = path + ":" + std::to_string(n) + ": ";
    if (j.is_discarded()) return InvalidArgumentError(where + "not JSON");
    if (j.is_object() && j.contains("run")) {
      if (!f.header.is_null() || !f.records.empty()) return InvalidArgumentError(where + "a header line after the first line");
      f.header = j["run"];
      continue;
    }
    StatusOr<RequestRecord> r = RecordFromJson(j);
    if (!r.ok()) return InvalidArgumentError(where + r.status().message());
    f.records.push_back(std::move(r).value());
  }
  if (in.bad()) return DataLossError(path + ": read error");
  return f;
}

Status WriteRecordFile(const std::string& path, const std::vector<RequestRecord>& records, const Json& header) {
  DS41_ASSIGN_OR_RETURN(std::unique_ptr<RecordWriter> w, RecordWriter::Open(path, header));
  for (const RequestRecord& r : records) DS41_RETURN_IF_ERROR(w->Append(r));
  return w->Close();
}

StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Open(const std::string& path, const Json& header) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return NotFoundError("cannot create the record file " + path);
  std::unique_ptr<RecordWriter> w(new RecordWriter(f, path));
  if (!header.is_null()) {
    const std::string line = Json{{"run", header}}.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    if (std::fputs(line.c_str(), f) < 0 || std::fflush(f) != 0) return DataLossError("cannot write " + path);
  }
  return w;
}

RecordWriter::~RecordWriter() { Close().IgnoreError(); }

Status RecordWriter::Append(const RequestRecord& r) {
  const std::string line = ToJsonLine(r) + "\n";
  MutexLock l(&mu_);
  if (f_ == nullptr) return FailedPreconditionError("the record file " + path_ + " is closed");
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0) {
    return DataLossError("cannot write " + path_);
  }
  return Status::Ok();
}

Status RecordWriter::Close() {
  MutexLock l(&mu_);
  if (f_ == nullptr) return Status::Ok();
  const bool ok = std::fclose(f_) == 0;
  f_ = nullptr;
  return ok ? Status::Ok() : DataLossError("cannot close " + path_);
}

RequestRecord RecordOf(const WorkloadRequest& w) {
  RequestRecord r;
  r.index = w.index;
  r.session = w.session;
  r.arrival_s = w.arrival_s;
  r.prompt_tokens = w.prompt_tokens;
  r.output_tokens = w.output_tokens;
  return r;
}

}  // namespace ds41
