#include "trace/run_header.h"

#include <cmath>

namespace ds41 {

using Json = nlohmann::json;

Json RunHeaderJson(const RunHeader& h) {
  return {{"label", h.label},
          {"unit_tokens", h.unit_tokens},
          {"ceiling", {{"prompt_tokens", h.ceiling.prompt_tokens}, {"hit_tokens", h.ceiling.hit_tokens}}},
          {"slo", {{"ttft_s", h.slo.ttft_s}, {"itl_s", h.slo.itl_s}}},
          {"nodes", {{"decoders", h.nodes.decoders}, {"encoders", h.nodes.encoders}}},
          {"options", h.options}};
}

StatusOr<RunHeader> RunHeaderFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgumentError("the run header must be a JSON object");
  RunHeader h;
  auto bad = [](const char* field) { return InvalidArgumentError(std::string("run header field \"") + field + "\" has the wrong type"); };
  if (j.contains("label")) {
    if (!j["label"].is_string()) return bad("label");
    h.label = j["label"].get<std::string>();
  }
  if (j.contains("unit_tokens")) {
    if (!j["unit_tokens"].is_number_integer()) return bad("unit_tokens");
    h.unit_tokens = j["unit_tokens"].get<int>();
  }
  if (j.contains("ceiling")) {
    const Json& c = j["ceiling"];
    if (!c.is_object() || !c.value("prompt_tokens", Json(0)).is_number_integer() ||
        !c.value("hit_tokens", Json(0)).is_number_integer()) {
      return bad("ceiling");
    }
    h.ceiling.prompt_tokens = c.value("prompt_tokens", int64_t{0});
    h.ceiling.hit_tokens = c.value("hit_tokens", int64_t{0});
  }
  if (j.contains("slo")) {
    const Json& s = j["slo"];
    if (!s.is_object() || !s.value("ttft_s", Json(0)).is_number() || !s.value("itl_s", Json(0)).is_number()) return bad("slo");
    h.slo.ttft_s = s.value("ttft_s", h.slo.ttft_s);
    h.slo.itl_s = s.value("itl_s", h.slo.itl_s);
  }
  if (j.contains("nodes")) {
    const Json& n = j["nodes"];
    if (!n.is_object()) return bad("nodes");
    for (const char* pool : {"decoders", "encoders"}) {
      if (!n.contains(pool)) continue;
      if (!n[pool].is_array()) return bad("nodes");
      for (const Json& x : n[pool]) {
        if (!x.is_string()) return bad("nodes");
        (std::string(pool) == "decoders" ? h.nodes.decoders : h.nodes.encoders).push_back(x.get<std::string>());
      }
    }
  }
  if (j.contains("options")) h.options = j["options"];
  return h;
}

void AddWorkloadOptions(const std::string& trace_path, const WorkloadOptions& w, nlohmann::json* options) {
  nlohmann::json& o = *options;
  o["trace"] = trace_path;
  o["token_scale"] = w.token_scale;
  o["output_scale"] = w.output_scale;
  o["time_scale"] = w.time_scale;
  o["start_s"] = w.start_s;
  o["duration_s"] = std::isfinite(w.duration_s) ? nlohmann::json(w.duration_s) : nlohmann::json(nullptr);
  o["max_requests"] = w.max_requests;
  o["replicas"] = w.replicas;
  o["replica_stagger"] = w.replica_stagger;
  o["session_sample"] = w.session_sample;
  o["trace_block_tokens"] = w.trace_block_tokens;
}

WorkloadOptions WorkloadOptionsOf(const nlohmann::json& options, std::string* trace_path) {
  WorkloadOptions w;
  auto number = [&](const char* key, double fallback) {
    return options.is_object() && options.contains(key) && options[key].is_number() ? options[key].get<double>() : fallback;
  };
  w.token_scale = number("token_scale", w.token_scale);
  w.output_scale = number("output_scale", w.output_scale);
  w.time_scale = number("time_scale", w.time_scale);
  w.start_s = number("start_s", w.start_s);
  w.duration_s = number("duration_s", w.duration_s);
  w.max_requests = static_cast<int64_t>(number("max_requests", static_cast<double>(w.max_requests)));
  w.replicas = static_cast<int>(number("replicas", w.replicas));
  w.replica_stagger = options.is_object() && options.contains("replica_stagger") && options["replica_stagger"].is_boolean() &&
                      options["replica_stagger"].get<bool>();
  w.session_sample = static_cast<int>(number("session_sample", w.session_sample));
  w.trace_block_tokens = static_cast<int>(number("trace_block_tokens", w.trace_block_tokens));
  *trace_path = options.is_object() && options.contains("trace") && options["trace"].is_string()
                    ? options["trace"].get<std::string>()
                    : "";
  return w;
}

}  // namespace ds41
