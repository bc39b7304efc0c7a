#include "router/rate_profile.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ds41 {
namespace {

using Json = nlohmann::json;

// Reads field `key` of `j` into *v when present.
template <typename T>
Status Get(const Json& j, const char* section, const char* key, T* v) {
  if (!j.contains(key)) return Status::Ok();
  const Json& x = j[key];
  const std::string name = std::string(section) + (section[0] ? "." : "") + key;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!x.is_string()) return InvalidArgumentError("profile: " + name + " must be a string");
  } else if constexpr (std::is_integral_v<T>) {
    if (!x.is_number_integer() && !(x.is_number_float() && x.get<double>() == static_cast<double>(static_cast<int64_t>(x.get<double>()))))
      return InvalidArgumentError("profile: " + name + " must be an integer");
    *v = static_cast<T>(x.get<double>());
    return Status::Ok();
  } else {
    if (!x.is_number()) return InvalidArgumentError("profile: " + name + " must be a number");
  }
  *v = x.get<T>();
  return Status::Ok();
}

Status Section(const Json& j, const char* name, const Json** out) {
  static const Json kEmpty = Json::object();
  *out = &kEmpty;
  if (!j.contains(name)) return Status::Ok();
  if (!j[name].is_object()) return InvalidArgumentError(std::string("profile: ") + name + " must be an object");
  *out = &j[name];
  return Status::Ok();
}

Status Positive(double v, const char* name) {
  return v > 0 ? Status::Ok() : InvalidArgumentError(std::string("profile: ") + name + " must be > 0");
}
Status NonNegative(double v, const char* name) {
  return v >= 0 ? Status::Ok() : InvalidArgumentError(std::string("profile: ") + name + " must be >= 0");
}

}  // namespace

Status RateProfile::Validate() const {
  if (host_cores < 0) return InvalidArgumentError("profile: host_cores must be >= 0");
  if (window < 0) return InvalidArgumentError("profile: window must be >= 0");
  DS41_RETURN_IF_ERROR(Positive(kv_bytes_per_token, "kv_bytes_per_token"));
  DS41_RETURN_IF_ERROR(NonNegative(request_overhead_s, "request_overhead_s"));
  if (encoder.step_tokens < 1) return InvalidArgumentError("profile: encoder.step_tokens must be >= 1");
  for (auto [v, n] : {std::pair{encoder.step_s, "encoder.step_s"}, {encoder.token_s, "encoder.token_s"},
                      {encoder.token_context_s, "encoder.token_context_s"}, {encoder.replay_token_s, "encoder.replay_token_s"},
                      {encoder.load_token_s, "encoder.load_token_s"}, {encoder.swa_ttl_s, "encoder.swa_ttl_s"},
                      {decoder.step_s, "decoder.step_s"}, {decoder.step_seq_s, "decoder.step_seq_s"},
                      {decoder.step_context_s, "decoder.step_context_s"}, {decoder.replay_token_s, "decoder.replay_token_s"},
                      {decoder.load_token_s, "decoder.load_token_s"}, {decoder.session_ttl_s, "decoder.session_ttl_s"},
                      {decoder.state_bytes_per_token, "decoder.state_bytes_per_token"}, {decoder.swa_ttl_s, "decoder.swa_ttl_s"},
                      {store.ttl_s, "store.ttl_s"}, {network.latency_s, "network.latency_s"}}) {
    DS41_RETURN_IF_ERROR(NonNegative(v, n));
  }
  if (encoder.token_s + encoder.token_context_s + encoder.step_s <= 0)
    return InvalidArgumentError("profile: an encoder step must take some work (encoder.token_s)");
  if (decoder.step_s + decoder.step_seq_s <= 0)
    return InvalidArgumentError("profile: a decode step must take some work (decoder.step_s, decoder.step_seq_s)");
  if (decoder.max_running < 1) return InvalidArgumentError("profile: decoder.max_running must be >= 1");
  if (store.shards < 1) return InvalidArgumentError("profile: store.shards must be >= 1");
  DS41_RETURN_IF_ERROR(Positive(store.shard_bytes_per_s, "store.shard_bytes_per_s"));
  DS41_RETURN_IF_ERROR(Positive(network.link_bytes_per_s, "network.link_bytes_per_s"));
  return Status::Ok();
}

Json RateProfileJson(const RateProfile& p) {
  const EncoderRates& e = p.encoder;
  const DecoderRates& d = p.decoder;
  return {{"name", p.name},
          {"source", p.source},
          {"host_cores", p.host_cores},
          {"window", p.window},
          {"kv_bytes_per_token", p.kv_bytes_per_token},
          {"request_overhead_s", p.request_overhead_s},
          {"swa_state_bytes", p.swa_state_bytes},
          {"node_cache_bytes", p.node_cache_bytes},
          {"encoder",
           {{"step_tokens", e.step_tokens}, {"step_s", e.step_s}, {"token_s", e.token_s}, {"token_context_s", e.token_context_s},
            {"replay_token_s", e.replay_token_s}, {"load_token_s", e.load_token_s}, {"swa_pool_bytes", e.swa_pool_bytes},
            {"swa_ttl_s", e.swa_ttl_s}}},
          {"decoder",
           {{"max_running", d.max_running}, {"step_s", d.step_s}, {"step_seq_s", d.step_seq_s},
            {"step_context_s", d.step_context_s}, {"replay_token_s", d.replay_token_s}, {"load_token_s", d.load_token_s},
            {"session_bytes", d.session_bytes}, {"session_ttl_s", d.session_ttl_s},
            {"state_bytes_per_token", d.state_bytes_per_token}, {"state_fixed_bytes", d.state_fixed_bytes},
            {"swa_pool_bytes", d.swa_pool_bytes}, {"swa_ttl_s", d.swa_ttl_s}}},
          {"store",
           {{"capacity_bytes", p.store.capacity_bytes}, {"ttl_s", p.store.ttl_s}, {"shards", p.store.shards},
            {"shard_bytes_per_s", p.store.shard_bytes_per_s}}},
          {"network", {{"link_bytes_per_s", p.network.link_bytes_per_s}, {"latency_s", p.network.latency_s}}}};
}

StatusOr<RateProfile> RateProfileFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgumentError("profile: not a JSON object");
  RateProfile p;
  DS41_RETURN_IF_ERROR(Get(j, "", "name", &p.name));
  DS41_RETURN_IF_ERROR(Get(j, "", "source", &p.source));
  DS41_RETURN_IF_ERROR(Get(j, "", "host_cores", &p.host_cores));
  DS41_RETURN_IF_ERROR(Get(j, "", "window", &p.window));
  DS41_RETURN_IF_ERROR(Get(j, "", "kv_bytes_per_token", &p.kv_bytes_per_token));
  DS41_RETURN_IF_ERROR(Get(j, "", "request_overhead_s", &p.request_overhead_s));
  DS41_RETURN_IF_ERROR(Get(j, "", "swa_state_bytes", &p.swa_state_bytes));
  DS41_RETURN_IF_ERROR(Get(j, "", "node_cache_bytes", &p.node_cache_bytes));
  const Json* s = nullptr;
  DS41_RETURN_IF_ERROR(Section(j, "encoder", &s));
  EncoderRates& e = p.encoder;
  DS41_RETURN_IF_ERROR(Get(*s, "encoder", "step_tokens", &e.step_tokens));
  DS41_RETURN_IF_ERROR(Get(*s, "encoder", "step_s", &e.step_s));
  DS41_RETURN_IF_ERROR(Get(*s, "encoder", "token_s", &e.token_s));
  DS41_RETURN_IF_ERROR(Get(*s, "encoder", "token_context_s", &e.token_context_s));
  DS41_RETURN_IF_ERROR(Get(*s, "encoder", "replay_token_s", &e.replay_token_s));
  DS41_RETURN_IF_ERROR(Get(*s, "encoder", "load_token_s", &e.load_token_s));
  DS41_RETURN_IF_ERROR(Get(*s, "encoder", "swa_pool_bytes", &e.swa_pool_bytes));
  DS41_RETURN_IF_ERROR(Get(*s, "encoder", "swa_ttl_s", &e.swa_ttl_s));
  DS41_RETURN_IF_ERROR(Section(j, "decoder", &s));
  DecoderRates& d = p.decoder;
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "max_running", &d.max_running));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "step_s", &d.step_s));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "step_seq_s", &d.step_seq_s));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "step_context_s", &d.step_context_s));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "replay_token_s", &d.replay_token_s));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "load_token_s", &d.load_token_s));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "session_bytes", &d.session_bytes));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "session_ttl_s", &d.session_ttl_s));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "state_bytes_per_token", &d.state_bytes_per_token));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "state_fixed_bytes", &d.state_fixed_bytes));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "swa_pool_bytes", &d.swa_pool_bytes));
  DS41_RETURN_IF_ERROR(Get(*s, "decoder", "swa_ttl_s", &d.swa_ttl_s));
  DS41_RETURN_IF_ERROR(Section(j, "store", &s));
  DS41_RETURN_IF_ERROR(Get(*s, "store", "capacity_bytes", &p.store.capacity_bytes));
  DS41_RETURN_IF_ERROR(Get(*s, "store", "ttl_s", &p.store.ttl_s));
  DS41_RETURN_IF_ERROR(Get(*s, "store", "shards", &p.store.shards));
  DS41_RETURN_IF_ERROR(Get(*s, "store", "shard_bytes_per_s", &p.store.shard_bytes_per_s));
  DS41_RETURN_IF_ERROR(Section(j, "network", &s));
  DS41_RETURN_IF_ERROR(Get(*s, "network", "link_bytes_per_s", &p.network.link_bytes_per_s));
  DS41_RETURN_IF_ERROR(Get(*s, "network", "latency_s", &p.network.latency_s));
  DS41_RETURN_IF_ERROR(p.Validate());
  return p;
}

StatusOr<RateProfile> ReadRateProfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("profile: cannot open " + path);
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (j.is_discarded()) return InvalidArgumentError("profile: " + path + " is not JSON");
  auto p = RateProfileFromJson(j);
  if (!p.ok()) return p.status().Prefixed(path);
  return p;
}

Status WriteRateProfile(const std::string& path, const RateProfile& p, const std::string& header) {
  std::ofstream out(path);
  if (!out) return UnavailableError("profile: cannot write " + path);
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) out << "// " << line << "\n";
  out << RateProfileJson(p).dump(2) << "\n";
  if (!out) return UnavailableError("profile: writing " + path + " failed");
  return Status::Ok();
}

CostModel CostModelFromProfile(const RateProfile& p) {
  // A rate of work that takes no time is taken as very fast, not as a division by zero.
  auto per_s = [](double s) { return 1.0 / std::max(s, 1e-12); };
  CostModel m;
  m.encoder_tokens_per_s = per_s(p.encoder.token_s);
  m.encoder_replay_tokens_per_s = per_s(p.encoder.replay_token_s);
  m.decoder_replay_tokens_per_s = per_s(p.decoder.replay_token_s);
  m.decode_step_s = p.decoder.step_s;
  m.decode_step_seq_s = p.decoder.step_seq_s;
  m.max_batch = p.decoder.max_running;
  m.kv_bytes_per_token = p.kv_bytes_per_token;
  // A prefix token reaches a decoder that is not warm at the slower of the store's shard and the
  // node's link, and is then decoded from its unit.
  const double wire_s = p.kv_bytes_per_token / std::min(p.store.shard_bytes_per_s, p.network.link_bytes_per_s);
  m.kv_bytes_per_s = p.kv_bytes_per_token * per_s(wire_s + p.decoder.load_token_s);
  return m;
}

}  // namespace ds41
