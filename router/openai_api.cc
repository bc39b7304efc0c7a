#include "router/openai_api.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstdlib>
#include <future>
#include <random>
#include <sstream>

#include "chat/chat_render.h"
#include "chat/reply_parser.h"
#include "grammar/json_grammar.h"
#include "grammar/tool_call_grammar.h"
#include "node_client/node_codec.h"
#include "tokenizer/utf8.h"
#include "unit/reply_record.h"
#include "util/error_table.h"
#include "util/sha256.h"

namespace ds41 {

// A request's generation options: what the decoder samples by, and how the reply is cut and shown.

namespace {

constexpr size_t kMaxStops = 4;
constexpr size_t kMaxStopBytes = 256;
constexpr int kMaxCompletionLogprobs = 5;  // OpenAI's bound for /v1/completions' "logprobs"

// The request fields each endpoint acts on; kIgnoredFields are accepted and change nothing in the
// reply (README "Request fields"). Anything else is refused with a 400 naming it, so a client never
// gets a reply that silently left out what it asked for.
constexpr std::string_view kChatFields[] = {
    "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "response_format", "thinking",
    "reasoning_effort", "temperature", "top_p", "n", "stream", "stream_options", "stop", "max_tokens",
    "max_completion_tokens", "seed", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs",
    "top_logprobs", "user", "ignore_eos", "return_token_ids"};
constexpr std::string_view kCompletionFields[] = {
    "model", "prompt", "temperature", "top_p", "n", "best_of", "echo", "stream", "stream_options", "stop",
    "max_tokens", "max_completion_tokens", "seed", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs",
    "user", "ignore_eos", "return_token_ids"};
constexpr std::string_view kIgnoredFields[] = {"metadata", "store", "service_tier", "prompt_cache_key",
                                               "safety_identifier"};

template <size_t N>
bool Listed(const std::string_view (&list)[N], std::string_view key) {
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}

// The first field of `body` neither acted on nor knowingly ignored, refused.
template <size_t N>
std::optional<ApiOutcome> RefuseUnknownFields(const Json& body, const std::string_view (&fields)[N]) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (Listed(fields, it.key()) || Listed(kIgnoredFields, it.key())) continue;
    std::string why = "this server does not implement it";
    if (it.key() == "functions" || it.key() == "function_call") why = "it is deprecated: use \"tools\" and \"tool_choice\"";
    return OpenAiApi::Error(StatusCode::kInvalidArgument, "unrecognized request argument \"" + it.key() + "\": " + why,
                            it.key());
  }
  return std::nullopt;
}

std::string RandomHex(int bytes) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < bytes; ++i) {
    const auto b = static_cast<uint8_t>(rng());
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Text generated so far, released only where no stop string can still begin.
class StopCutter {
 public:
  explicit StopCutter(std::vector<std::string> stops) : stops_(std::move(stops)) {
    for (const auto& s : stops_) hold_ = std::max(hold_, s.size() - 1);
  }
  // Appends text; returns the newly releasable part. `stopped` turns true at a stop string.
  std::string Add(const std::string& more) {
    if (stopped_) return "";
    const size_t search_from = text_.size() >= hold_ ? text_.size() - hold_ : 0;
    text_ += more;
    size_t cut = std::string::npos;
    for (const auto& s : stops_) {
      const size_t p = text_.find(s, search_from);
      if (p != std::string::npos) cut = std::min(cut, p);
    }
    size_t upto;
    if (cut != std::string::npos) {
      stopped_ = true;
      text_.resize(cut);
      upto = cut;
    } else {
      upto = text_.size() > hold_ ? text_.size() - hold_ : 0;
    }
    std::string out;
    if (upto > released_) out = text_.substr(released_, upto - released_);
    released_ = std::max(released_, upto);
    return out;
  }
  std::string Flush() {
    std::string out = text_.substr(released_);
    released_ = text_.size();
    return out;
  }
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stops_;
  size_t hold_ = 0;
  std::string text_;
  size_t released_ = 0;
  bool stopped_ = false;
};

Json UsageJson(const RouteResult& r) {
  const RouteUsage& u = r.usage;
  Json j;
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  j["prompt_cache_hit_tokens"] = u.cached_tokens;
  j["prompt_cache_miss_tokens"] = u.prompt_tokens - u.cached_tokens;
  j["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  j["ds41"] = {{"computed_tokens", u.computed_tokens},
               {"encoder_replay_tokens", u.encoder_replay_tokens},
               {"decoder_replay_tokens", u.decoder_replay_tokens},
               {"prefix_source", u.prefix_source},
               {"swa_source", u.swa_source},
               {"ttft_seconds", u.ttft_seconds},
               {"predicted_ttft_seconds", u.predicted_ttft_seconds},
               {"decoder", r.placement.decoder},
               {"encoder", r.placement.encoder},
               {"placement_reason", r.placement.reason},
               {"swa_hint", r.swa_hint},
               {"attempts", r.attempts},
               {"migrations", r.migrations}};
  return j;
}

Json ToolCallsJson(const std::vector<chat::ToolCall>& calls, size_t first_index) {
  Json arr = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    arr.push_back({{"index", first_index + i},
                   {"id", "call_" + RandomHex(12)},
                   {"type", "function"},
                   {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}});
  }
  return arr;
}

// `body[key]`, when present and not null, as a number in [lo, hi] into `out`; else the 400 naming it.
std::optional<ApiOutcome> NumberIn(const Json& body, const char* key, double lo, double hi, float* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  if (!body[key].is_number() || !(body[key].get<double>() >= lo && body[key].get<double>() <= hi)) {
    std::ostringstream m;
    m << "\"" << key << "\" must be a number in [" << lo << ", " << hi << "]";
    return OpenAiApi::Error(StatusCode::kInvalidArgument, m.str(), key);
  }
  *out = body[key].get<float>();
  return std::nullopt;
}

// logit_bias: {"<token id>": bias in [-100, 100], ...} over the model's vocabulary.
std::optional<ApiOutcome> ParseLogitBias(const Json& body, int32_t vocab, GenerateSampling* s) {
  if (!body.contains("logit_bias") || body["logit_bias"].is_null()) return std::nullopt;
  const Json& b = body["logit_bias"];
  auto refuse = [](const std::string& m) { return OpenAiApi::Error(StatusCode::kInvalidArgument, m, "logit_bias"); };
  if (!b.is_object()) return refuse("\"logit_bias\" must be an object of token ids to numbers");
  if (b.size() > kMaxLogitBias) return refuse("\"logit_bias\" may hold at most " + std::to_string(kMaxLogitBias) + " tokens");
  for (auto it = b.begin(); it != b.end(); ++it) {
    const std::string& key = it.key();
    const bool digits = !key.empty() && key.size() <= 10 && std::all_of(key.begin(), key.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    if (!digits || std::stoll(key) >= vocab) {
      return refuse("\"logit_bias\" key \"" + key.substr(0, 32) + "\" is not a token id in [0, " + std::to_string(vocab) + ")");
    }
    if (!it.value().is_number() || !(it.value().get<double>() >= -100 && it.value().get<double>() <= 100)) {
      return refuse("\"logit_bias\" values must be numbers in [-100, 100]");
    }
    // Keys are distinct strings, but "7" and "07" name one token.
    const auto id = static_cast<int32_t>(std::stoll(key));
    for (const auto& [seen, _] : s->logit_bias)
      if (seen == id) return refuse("\"logit_bias\" names token " + std::to_string(id) + " twice");
    s->logit_bias.emplace_back(id, it.value().get<float>());
  }
  return std::nullopt;
}

// Chat: "logprobs": bool and "top_logprobs": 0..20; completions: "logprobs": 0..5, the top count.
std::optional<ApiOutcome> ParseLogprobs(const Json& body, bool chat_mode, GenerateSampling* s) {
  const bool has = body.contains("logprobs") && !body["logprobs"].is_null();
  const bool has_top = body.contains("top_logprobs") && !body["top_logprobs"].is_null();
  if (!chat_mode) {
    if (!has) return std::nullopt;
    const Json& n = body["logprobs"];
    if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > kMaxCompletionLogprobs) {
      return OpenAiApi::Error(StatusCode::kInvalidArgument,
                              "\"logprobs\" must be an integer in [0, " + std::to_string(kMaxCompletionLogprobs) + "]",
                              "logprobs");
    }
    s->logprobs = true;
    s->top_logprobs = static_cast<int>(n.get<int64_t>());
    return std::nullopt;
  }
  if (has && !body["logprobs"].is_boolean()) {
    return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"logprobs\" must be a boolean", "logprobs");
  }
  s->logprobs = has && body["logprobs"].get<bool>();
  if (!has_top) return std::nullopt;
  const Json& n = body["top_logprobs"];
  if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > kMaxTopLogprobs) {
    return OpenAiApi::Error(StatusCode::kInvalidArgument,
                            "\"top_logprobs\" must be an integer in [0, " + std::to_string(kMaxTopLogprobs) + "]",
                            "top_logprobs");
  }
  if (!s->logprobs) {
    return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"top_logprobs\" needs \"logprobs\": true", "top_logprobs");
  }
  s->top_logprobs = static_cast<int>(n.get<int64_t>());
  return std::nullopt;
}

bool ThinkingEnabled(const Json& body) {
  return body.contains("thinking") && body["thinking"].is_object() && body["thinking"].value("type", Json()) == "enabled";
}

// The tools `choice` may call (a named function: that one), as the tool-call grammar takes them.
// A required or named choice that leaves none is refused; "auto" may leave none.
std::optional<ApiOutcome> CallableTools(const Json& body, const Json& choice, std::vector<grammar::ToolSpec>* out) {
  auto refuse = [](const std::string& m) { return OpenAiApi::Error(StatusCode::kInvalidArgument, m, "tool_choice"); };
  const bool any = choice == "auto";
  if (!body.contains("tools") || !body["tools"].is_array() || body["tools"].empty()) {
    if (any) return std::nullopt;
    return refuse("\"tool_choice\" other than \"none\" or \"auto\" needs \"tools\"");
  }
  std::string only;
  if (choice.is_object()) {
    if (!choice.contains("function") || !choice["function"].is_object() || !choice["function"].contains("name") ||
        !choice["function"]["name"].is_string()) {
      return refuse("\"tool_choice\" must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    only = choice["function"]["name"].get<std::string>();
    if (only.empty()) return refuse("\"tool_choice\" must name a function: the name is empty");
  }
  for (const Json& t : body["tools"]) {
    const Json* fn = t.is_object() && t.contains("function") && t["function"].is_object() ? &t["function"] : nullptr;
    if (fn == nullptr || !fn->contains("name") || !(*fn)["name"].is_string()) continue;  // RenderChat refuses it
    const std::string name = (*fn)["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const bool strict = fn->contains("strict") && (*fn)["strict"].is_boolean() && (*fn)["strict"].get<bool>();
    out->push_back({name, fn->contains("parameters") ? (*fn)["parameters"] : Json(), strict});
  }
  if (out->empty() && !any) return refuse("\"tool_choice\" names \"" + only + "\", which is not among the tools");
  return std::nullopt;
}

// Chat's tool and output controls, enforced by constrained decoding on the decoder:
// response_format json_object / json_schema; tool_choice "required" or a named function (the reply
// is a tool-call block, one call when parallel_tool_calls is false); and, under "auto", tools
// defined with strict: true (the reply is text, and a block after it only if it holds to the
// tools' schemas). Grammars are compiled here first, so a bad schema is this request's 400.
std::optional<ApiOutcome> ParseAgentControls(const Json& body, RequestSampling* s) {
  auto refuse = [](const std::string& m, const char* field) {
    return OpenAiApi::Error(StatusCode::kInvalidArgument, m, field);
  };
  bool parallel = true;
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) return refuse("\"parallel_tool_calls\" must be a boolean", "parallel_tool_calls");
    parallel = body["parallel_tool_calls"].get<bool>();
  }
  const Json choice = body.contains("tool_choice") && !body["tool_choice"].is_null() ? body["tool_choice"] : Json("auto");
  const bool forced = choice == "required" || (choice.is_object() && choice.value("type", Json()) == "function");
  if (choice == "none") {
    s->tool_calls = false;
  } else if (!forced && choice != "auto") {
    return refuse("\"tool_choice\" must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", ...}",
                  "tool_choice");
  }
  std::vector<grammar::ToolSpec> tools;
  if (choice != "none") {
    if (auto refused = CallableTools(body, choice, &tools)) return refused;
  }
  // Under "auto", strict tools and parallel_tool_calls false are enforced by the same optional grammar.
  const bool strict = std::any_of(tools.begin(), tools.end(), [](const grammar::ToolSpec& t) { return t.strict; });
  if (forced || (!tools.empty() && (strict || !parallel))) {
    grammar::ToolCallOptions o;
    o.parallel = parallel;
    o.thinking = ThinkingEnabled(body);
    o.optional = !forced;
    if (auto g = grammar::CompileToolCalls(tools, o); !g.ok()) return refuse("tools: " + g.status().message(), "tools");
    s->decode.tool_calls = grammar::ToolCallSpecText(tools, o);
    if (s->decode.tool_calls.size() > kMaxResponseSchemaBytes) {
      return refuse("tools: too large to hold calls to (" + std::to_string(s->decode.tool_calls.size()) + " bytes, at most " +
                        std::to_string(kMaxResponseSchemaBytes) + ")",
                    "tools");
    }
  }
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const Json& f = body["response_format"];
    if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) {
      return refuse("\"response_format\" must be {\"type\": \"text\"|\"json_object\"|\"json_schema\", ...}", "response_format");
    }
    const bool json = f["type"] == "json_object" || f["type"] == "json_schema";
    if (json && forced) {
      // The reply is tool calls and carries no content for the format to shape (as OpenAI's): the
      // format is checked below and the tool grammar alone holds the reply.
    } else if (json) {
      s->decode.response_json = true;
      s->decode.response_after_reasoning = ThinkingEnabled(body);  // the reasoning stays free
      s->tool_calls = false;  // the reply is the document
    } else if (f["type"] != "text") {
      return refuse("\"response_format\" type must be \"text\", \"json_object\" or \"json_schema\"", "response_format");
    }
    if (f["type"] == "json_schema") {
      if (!f.contains("json_schema") || !f["json_schema"].is_object()) {
        return refuse("\"response_format\" of type \"json_schema\" needs a \"json_schema\" object", "response_format");
      }
      const Json& js = f["json_schema"];
      if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null()) {
        return refuse("\"response_format.json_schema.strict\" must be a boolean", "response_format");
      }
      if (js.contains("schema") && !js["schema"].is_null()) {
        auto compiled = grammar::CompileJsonSchema(js["schema"]);
        if (!compiled.ok()) return refuse("response_format.json_schema." + compiled.status().message(), "response_format");
        const std::string text = js["schema"].dump();
        if (text.size() > kMaxResponseSchemaBytes) {
          return refuse("\"response_format.json_schema.schema\" is larger than " + std::to_string(kMaxResponseSchemaBytes) +
                            " bytes",
                        "response_format");
        }
        if (s->decode.response_json) s->decode.response_schema = text;
      }
    }
    if (s->decode.response_json && !s->decode.tool_calls.empty()) {
      return refuse("\"response_format\" and tools held to their schemas under \"tool_choice\": \"auto\" (strict "
                    "tools, parallel_tool_calls false) cannot both shape the reply yet",
                    "response_format");
    }
  }
  return std::nullopt;
}

// The generation options of `body`, checked once before the prompt is rendered (max_tokens is
// capped by Run, which knows the prompt's length); or the error naming the offending field.
std::optional<ApiOutcome> ParseSampling(const Json& body, bool chat_mode, int32_t vocab, RequestSampling* out) {
  GenerateSampling* s = &out->decode;
  s->temperature = 1;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    if (!body[key].is_number_integer() || body[key].get<int64_t>() < 1) {
      return OpenAiApi::Error(StatusCode::kInvalidArgument, std::string("\"") + key + "\" must be a positive integer", key);
    }
    out->max_tokens_asked = static_cast<uint32_t>(std::min<int64_t>(body[key].get<int64_t>(), UINT32_MAX));
  }
  if (auto refused = NumberIn(body, "temperature", 0, 2, &s->temperature)) return refused;
  if (body.contains("top_p") && !body["top_p"].is_null()) {
    if (!body["top_p"].is_number() || body["top_p"].get<double>() <= 0 || body["top_p"].get<double>() > 1) {
      return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"top_p\" must be a number in (0, 1]", "top_p");
    }
    s->top_p = body["top_p"].get<float>();
  }
  s->seed = std::random_device{}();
  if (auto refused = NumberIn(body, "frequency_penalty", -2, 2, &s->frequency_penalty)) return refused;
  if (auto refused = NumberIn(body, "presence_penalty", -2, 2, &s->presence_penalty)) return refused;
  if (auto refused = ParseLogitBias(body, vocab, s)) return refused;
  if (auto refused = ParseLogprobs(body, chat_mode, s)) return refused;
  if (chat_mode) {
    if (auto refused = ParseAgentControls(body, out)) return refused;
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    // The last chunk always carries the usage, so include_usage is met either way.
    const Json& o = body["stream_options"];
    if (!o.is_object() || (o.size() == 1 && !o.contains("include_usage")) || o.size() > 1 ||
        (o.contains("include_usage") && !o["include_usage"].is_boolean())) {
      return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"stream_options\" must be {\"include_usage\": bool}",
                              "stream_options");
    }
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) {
      return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"seed\" must be an integer", "seed");
    }
    s->seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const Json& st = body["stop"];
    if (st.is_string()) {
      out->stops.push_back(st.get<std::string>());
    } else if (st.is_array() && st.size() <= kMaxStops) {
      for (const Json& x : st) {
        if (!x.is_string()) return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"stop\" entries must be strings", "stop");
        out->stops.push_back(x.get<std::string>());
      }
    } else {
      return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"stop\" must be a string or an array of at most 4 strings",
                              "stop");
    }
    for (const auto& x : out->stops) {
      if (x.empty() || x.size() > kMaxStopBytes) {
        return OpenAiApi::Error(StatusCode::kInvalidArgument, "each stop string must have 1..256 bytes", "stop");
      }
    }
  }
  if (body.contains("stream") && !body["stream"].is_boolean()) {
    return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"stream\" must be a boolean", "stream");
  }
  out->stream = body.value("stream", false);
  if (body.contains("ignore_eos") && !body["ignore_eos"].is_null()) {
    if (!body["ignore_eos"].is_boolean()) {
      return OpenAiApi::Error(StatusCode::kInvalidArgument, "\"ignore_eos\" must be a boolean", "ignore_eos");
    }
    out->ignore_eos = body["ignore_eos"].get<bool>();
    if (out->ignore_eos && (out->decode.response_json || !out->decode.tool_calls.empty())) {
      return OpenAiApi::Error(StatusCode::kInvalidArgument,
                              "\"ignore_eos\" cannot go with a constrained reply: the document ends the reply",
                              "ignore_eos");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<Json> ParseRequestJson(std::string_view text) {
  // The parser recurses per nesting level: refuse deep nesting before it can exhaust the stack.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return std::nullopt;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

OpenAiApi::OpenAiApi(RouterCore* core, const Tokenizer* tokenizer, std::string model_id, int64_t max_context_tokens,
                     int32_t model_vocab, const ReplyRecords* replies)
    : core_(core),
      tok_(tokenizer),
      model_id_(std::move(model_id)),
      max_context_(max_context_tokens),
      model_vocab_(model_vocab),
      replies_(replies),
      created_(NowSeconds()) {}

ApiOutcome OpenAiApi::Error(StatusCode code, const std::string& message, const std::string& param,
                            const std::string& openai_code) {
  assert(code != StatusCode::kOk);
  const ErrorMapping& m = ErrorMappingOf(code);
  const std::string_view ocode = openai_code.empty() ? m.openai_code : std::string_view(openai_code);
  ApiOutcome o;
  o.status = Status(code, message);
  o.http_status = m.http_status;
  o.body = {{"error",
             {{"message", message},
              {"type", m.openai_type},
              {"param", param.empty() ? Json(nullptr) : Json(param)},
              {"code", ocode.empty() ? Json(nullptr) : Json(ocode)}}}};
  o.retry_after_s = m.retry_after_s;
  return o;
}

ApiOutcome OpenAiApi::FromStatus(const Status& s) {
  if (s.ok()) return {};
  return Error(s.code(), s.message());
}

std::string LogprobTokenText(std::string_view bytes) {
  bool valid = true;
  for (size_t i = 0; i < bytes.size() && valid;) {
    const tokenizer::Utf8Unit u = tokenizer::DecodeUtf8At(bytes, i);
    valid = u.valid;
    i += u.len;
  }
  if (valid) return std::string(bytes);
  static const char* kHex = "0123456789abcdef";
  std::string out = "bytes:";
  for (unsigned char c : bytes) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

StatusOr<std::chrono::steady_clock::time_point> DeadlineFromTimeoutHeader(std::string_view seconds) {
  if (seconds.empty()) return std::chrono::steady_clock::time_point::max();
  const std::string text(seconds);
  char* end = nullptr;
  const double s = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(s > 0) || s > 1e7) {
    return InvalidArgumentError("the timeout header must be a number of seconds in (0, 1e7]: \"" + text + "\"");
  }
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

bool OpenAiApi::draining() const { return core_->draining(); }

Json OpenAiApi::Models() const {
  return {{"object", "list"},
          {"data", Json::array({{{"id", model_id_}, {"object", "model"}, {"created", created_}, {"owned_by", "ds41-serve"}}})}};
}

std::optional<ApiOutcome> OpenAiApi::PrepareChat(const ApiContext& ctx, const Json& body, PreparedRequest* out) const {
  if (!body.is_object()) return Error(StatusCode::kInvalidArgument, "the request body must be a JSON object");
  if (std::optional<ApiOutcome> refused = RefuseUnknownFields(body, kChatFields)) return *std::move(refused);
  // Every generation option is checked before the prompt is rendered (and its grammar compiled once).
  RequestSampling sampling;
  if (std::optional<ApiOutcome> refused = ParseSampling(body, /*chat_mode=*/true, model_vocab_, &sampling)) {
    return *std::move(refused);
  }
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return Error(StatusCode::kInvalidArgument, "\"messages\" must be a non-empty array", "messages");
  }
  const Json tools = body.contains("tools") ? body["tools"] : Json(nullptr);
  if (!tools.is_null() && !tools.is_array()) return Error(StatusCode::kInvalidArgument, "\"tools\" must be an array", "tools");
  chat::ChatRenderOptions opt;
  opt.thinking = false;
  if (body.contains("thinking")) {
    const Json& t = body["thinking"];
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string() ||
        (t["type"] != "enabled" && t["type"] != "disabled")) {
      return Error(StatusCode::kInvalidArgument, "\"thinking\" must be {\"type\": \"enabled\"|\"disabled\"}", "thinking");
    }
    opt.thinking = t["type"] == "enabled";
  }
  auto effort = chat::ParseReasoningEffort(body.contains("reasoning_effort") ? body["reasoning_effort"] : Json(nullptr));
  if (!effort.ok()) return FromStatus(effort.status());
  opt.reasoning_effort = *effort;
  chat::ReplySpans& rendered = out->rendered;
  std::vector<chat::ChatImage> image_parts;
  auto pieces = chat::RenderChat(body["messages"], tools, opt, replies_ != nullptr ? &rendered : nullptr, &image_parts);
  if (!pieces.ok()) return FromStatus(pieces.status());
  // Images are decoded and validated before anything is tokenized or routed: a bad one is the
  // client's 400, naming its content part.
  auto images = DecodeRequestImages(image_parts, images_);
  if (!images.ok()) return Error(images.status().code(), images.status().message(), ImageErrorField(images.status()));
  auto prompt = ChatPromptIds(*pieces, rendered.spans, ctx.tenant.salt);
  if (!prompt.ok()) return FromStatus(prompt.status());
  std::vector<PromptImage> prompt_images;
  if (!images->empty()) {
    auto request = ExpandRequestImages(*prompt, std::move(*images), images_);
    if (!request.ok()) return FromStatus(request.status());
    auto fitted = PromptImagesOf(*request);
    if (!fitted.ok()) return Error(fitted.status().code(), fitted.status().message(), ImageErrorField(fitted.status()));
    *prompt = std::move(request->tokens);  // with each span's key tokens
    prompt_images = std::move(*fitted);
  }
  out->sampling = std::move(sampling);
  out->prompt = std::move(*prompt);
  out->chat_mode = true;
  out->thinking = opt.thinking;
  out->record_reply = replies_ != nullptr;
  out->images = std::move(prompt_images);
  return std::nullopt;
}

StatusOr<std::vector<int32_t>> OpenAiApi::ChatPromptIds(const std::vector<chat::PromptPiece>& pieces,
                                                        const std::vector<chat::AssistantSpan>& spans,
                                                        const std::string& tenant_salt) const {
  // The model sees the ids it generated for a reply it is shown again, as an uninterrupted context
  // holds them, rather than a re-tokenization of the reply's re-rendered text (docs/session_reuse.md).
  std::vector<std::optional<std::vector<int32_t>>> generated;
  if (replies_ != nullptr && !spans.empty()) {
    std::vector<chat::ReplyDigest> digests;
    digests.reserve(spans.size());
    for (const chat::AssistantSpan& span : spans) digests.push_back(span.digest);
    generated = replies_->Find(tenant_salt, digests);
  }
  std::vector<int32_t> prompt;
  size_t next_span = 0;
  for (size_t i = 0; i < pieces.size();) {
    if (next_span < generated.size() && spans[next_span].begin == i) {
      const chat::AssistantSpan& span = spans[next_span];
      const std::optional<std::vector<int32_t>>& ids = generated[next_span++];
      if (ids && span.end > span.begin) {
        prompt.insert(prompt.end(), ids->begin(), ids->end());
        i = span.end;
        continue;
      }
    }
    const chat::PromptPiece& p = pieces[i++];
    if (p.control) {
      auto id = tok_->IdOf(p.text);
      if (!id) return InternalError("the tokenizer lacks the control token " + p.text);
      prompt.push_back(*id);
    } else {
      std::vector<int32_t> ids = tok_->Encode(p.text, /*allow_control=*/false);
      prompt.insert(prompt.end(), ids.begin(), ids.end());
    }
  }
  return prompt;
}

std::optional<ApiOutcome> OpenAiApi::PrepareCompletion(const Json& body, PreparedRequest* out) const {
  if (!body.is_object()) return Error(StatusCode::kInvalidArgument, "the request body must be a JSON object");
  if (std::optional<ApiOutcome> refused = RefuseUnknownFields(body, kCompletionFields)) return *std::move(refused);
  // Every generation option is checked before the prompt is tokenized.
  RequestSampling sampling;
  if (std::optional<ApiOutcome> refused = ParseSampling(body, /*chat_mode=*/false, model_vocab_, &sampling)) {
    return *std::move(refused);
  }
  if (!body.contains("prompt")) return Error(StatusCode::kInvalidArgument, "\"prompt\" is required", "prompt");
  if (body.contains("echo") && body["echo"] == true) return Error(StatusCode::kInvalidArgument, "\"echo\" is not supported", "echo");
  if (body.contains("best_of") && !body["best_of"].is_null() && body["best_of"] != 1) {
    return Error(StatusCode::kInvalidArgument, "\"best_of\" must be 1: this server returns one choice per request", "best_of");
  }
  const Json& pr = body["prompt"];
  std::vector<int32_t>& prompt = out->prompt;
  if (pr.is_string()) {
    // The raw interface: control tokens written in the prompt are control tokens.
    prompt = tok_->Encode(pr.get_ref<const std::string&>(), /*allow_control=*/true);
  } else if (pr.is_array() && !pr.empty() && pr[0].is_number_integer()) {
    for (const Json& t : pr) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model_vocab_) {
        return Error(StatusCode::kInvalidArgument, "\"prompt\" token ids must be integers in [0, vocab size)", "prompt");
      }
      prompt.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  } else {
    return Error(StatusCode::kInvalidArgument, "\"prompt\" must be a string or an array of token ids", "prompt");
  }
  // An image token without its picture would run as a text token where the model expects a span.
  if (images_.enabled && std::find(prompt.begin(), prompt.end(), images_.image_token_id) != prompt.end()) {
    return Error(StatusCode::kInvalidArgument,
                 "\"prompt\" holds the image token; images come as image_url parts of /v1/chat/completions", "prompt");
  }
  out->sampling = std::move(sampling);
  out->chat_mode = false;
  return std::nullopt;
}

void OpenAiApi::ChatCompletions(const ApiContext& ctx, const Json& body, ChunkSink sink, ApiDone done) {
  PreparedRequest p;
  if (std::optional<ApiOutcome> refused = PrepareChat(ctx, body, &p)) return Refuse(ctx, std::move(*refused), done);
  Run(ctx, body, std::move(p), std::move(sink), std::move(done));
}

void OpenAiApi::Completions(const ApiContext& ctx, const Json& body, ChunkSink sink, ApiDone done) {
  PreparedRequest p;
  if (std::optional<ApiOutcome> refused = PrepareCompletion(body, &p)) return Refuse(ctx, std::move(*refused), done);
  Run(ctx, body, std::move(p), std::move(sink), std::move(done));
}

void OpenAiApi::Serve(bool chat, const ApiContext& ctx, const Json& body, ChunkSink sink, ApiDone done) {
  try {
    if (chat) {
      ChatCompletions(ctx, body, std::move(sink), done);
    } else {
      Completions(ctx, body, std::move(sink), done);
    }
  } catch (const std::exception& e) {
    // Thrown while the request was checked or tokenized: its ApiDone has not run.
    Refuse(ctx, Error(StatusCode::kInternal, std::string("internal error: ") + e.what()), done);
  }
}

std::optional<ApiOutcome> OpenAiApi::Admit(const Tenant& tenant, std::shared_ptr<RouteAdmission>* admission) {
  std::shared_ptr<TenantLimits::Place> place;
  if (limits_ != nullptr) {
    int retry_after_s = 1;
    auto p = limits_->Admit(tenant.name, &retry_after_s);
    if (!p.ok()) {
      ApiOutcome refused = FromStatus(p.status());
      refused.retry_after_s = retry_after_s;
      return refused;
    }
    place = std::move(*p);
  }
  auto admitted = core_->Admit();  // a refusal gives the tenant's place back (place goes)
  if (!admitted.ok()) return FromStatus(admitted.status());
  if (place) (*admitted)->AlsoRelease([place] { place->Release(); });
  *admission = std::move(*admitted);
  return std::nullopt;
}

void OpenAiApi::Refuse(const ApiContext& ctx, ApiOutcome out, const ApiDone& done) {
  if (ctx.admission) ctx.admission->Release();
  done(std::move(out));
}

namespace {

// Waits on this thread for what `start` hands its ApiDone (the synchronous API).
ApiOutcome Await(const std::function<void(ApiDone)>& start) {
  std::promise<ApiOutcome> ended;
  std::future<ApiOutcome> outcome = ended.get_future();
  start([&ended](ApiOutcome out) { ended.set_value(std::move(out)); });
  return outcome.get();
}

}  // namespace

ApiOutcome OpenAiApi::ChatCompletions(const ApiContext& ctx, const Json& body, const ChunkSink& sink) {
  return Await([&](ApiDone done) { ChatCompletions(ctx, body, sink, std::move(done)); });
}

ApiOutcome OpenAiApi::Completions(const ApiContext& ctx, const Json& body, const ChunkSink& sink) {
  return Await([&](ApiDone done) { Completions(ctx, body, sink, std::move(done)); });
}



namespace {

// The session within the tenant: the x-session-id header, else the body's "user", else derived from
// the conversation's opening, which identifies it across turns (a wrong guess only costs placement,
// never correctness).
std::string SessionId(const ApiContext& ctx, const Json& body, const std::vector<int32_t>& prompt) {
  std::string session = ctx.session_id;
  if (session.empty() && body.contains("user") && body["user"].is_string()) session = body["user"].get<std::string>();
  if (session.empty()) {
    const size_t head = std::min<size_t>(prompt.size(), 256);
    Sha256 h;
    h.Update(prompt.data(), head * sizeof(int32_t));
    session = "auto:" + h.HexDigest().substr(0, 32);
  }
  return session;
}

RouteRequest BuildRouteRequest(const ApiContext& ctx, bool chat_mode, const std::string& session,
                               std::vector<int32_t> prompt, const RequestSampling& s) {
  RouteRequest rq;
  rq.request_id = (chat_mode ? "chatcmpl-" : "cmpl-") + RandomHex(12);
  rq.tenant_salt = ctx.tenant.salt;
  rq.session_id = ctx.tenant.name + "/" + session;  // sessions of different tenants never meet
  rq.tokens = std::move(prompt);
  rq.sampling = s.decode;
  if (!s.ignore_eos) rq.sampling.stop_ids = {kEosId};
  rq.cancel = ctx.cancel;
  rq.deadline = ctx.deadline;
  rq.arrival = ctx.arrival;
  rq.admission = ctx.admission;
  return rq;
}

// One reply as it is generated: ids are detokenized, cut at stop strings and (chat) parsed into
// reasoning, content and tool calls; when streaming, each released piece goes to the sink as a
// chunk. Text is released only where no stop string can still begin, so no chunk shows a cut stop.
class ReplyStream {
 public:
  ReplyStream(const Tokenizer& tok, const RequestSampling& s, bool chat_mode, bool thinking, const ChunkSink& sink,
              std::string request_id, std::string model)
      : sink_(sink),
        chat_(chat_mode),
        thinking_(thinking),
        stream_(s.stream),
        logprobs_(s.decode.logprobs),
        id_(std::move(request_id)),
        model_(std::move(model)),
        created_(NowSeconds()),
        tok_(tok),
        detok_(tok),
        cutter_(s.stops),
        parser_(thinking, s.tool_calls) {
    if (stream_ && chat_) {
      Send({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
            {"finish_reason", nullptr}});
    }
  }

  // The generation callback: false stops generation (a stop string was reached, or the client left).
  bool Add(const GeneratedTokens& got) {
    out_ids_.insert(out_ids_.end(), got.ids.begin(), got.ids.end());
    for (size_t i = 0; i < got.ids.size(); ++i) {
      const int32_t id = got.ids[i];
      if (id == kEosId) continue;  // the end of the reply, not part of it
      if (logprobs_ && i < got.logprobs.size()) AddLogprob(id, got.logprobs[i]);
      Emit(cutter_.Add(detok_.Feed(id)), false);
      if (cutter_.stopped()) return false;
    }
    return !client_gone_;
  }

  // Once generation has ended: releases what was held back and ends the parse. The detokenizer's
  // last bytes go through the cutter before it lets go of its hold, so a stop string they complete
  // is still cut and none of them is lost.
  void Finish() {
    std::string rest = cutter_.Add(detok_.Flush());
    rest += cutter_.Flush();
    Emit(rest, true);
  }

  // The outcome once Finish ran: when streaming, the last chunk (finish reason, usage) is sent and
  // the outcome's body keeps only the usage; else the body is the whole completion.
  ApiOutcome Respond(const RouteResult& r, const std::vector<int32_t>& prompt, bool return_token_ids) {
    std::string finish = r.finish_reason == "length" ? "length" : "stop";
    if (!calls_.empty()) finish = "tool_calls";
    const Json usage = UsageJson(r);
    ApiOutcome out;
    if (stream_) {
      Json last = chat_ ? Json{{"index", 0}, {"delta", Json::object()}, {"logprobs", TakeLogprobs()}, {"finish_reason", finish}}
                        : Json{{"index", 0}, {"text", ""}, {"logprobs", TakeLogprobs()}, {"finish_reason", finish}};
      // Streamed, the ids come once, whole, in the last chunk (the chaos test checks streamed replies by them).
      if (return_token_ids) last["token_ids"] = out_ids_;
      Json c = Object(chat_ ? "chat.completion.chunk" : "text_completion", std::move(last));
      c["usage"] = usage;
      if (!client_gone_) sink_(c);
      out.body = {{"usage", usage}};
      return out;
    }
    Json choice;
    if (chat_) {
      choice = {{"index", 0}, {"message", Message()}, {"logprobs", TakeLogprobs()}, {"finish_reason", finish}};
    } else {
      choice = {{"index", 0}, {"text", content_}, {"logprobs", TakeLogprobs()}, {"finish_reason", finish}};
    }
    if (return_token_ids) {
      // As vLLM offers: the exact ids, so a client can extend the context without re-tokenizing.
      choice["prompt_token_ids"] = prompt;
      choice["token_ids"] = out_ids_;
    }
    out.body = Object(chat_ ? "chat.completion" : "text_completion", std::move(choice));
    out.body["usage"] = usage;
    return out;
  }

  // The assistant message as the client got it (streamed or whole).
  Json Message() const {
    Json msg = {{"role", "assistant"}, {"content", content_.empty() && !calls_.empty() ? Json(nullptr) : Json(content_)}};
    if (thinking_) msg["reasoning_content"] = reasoning_;
    if (!calls_.empty()) msg["tool_calls"] = ToolCallsJson(calls_, 0);
    return msg;
  }

  // Once generation ended well: the ids the model generated for the whole reply the client got
  // (its end-of-sentence dropped: the rendering writes one after every assistant message); nullopt
  // when the client got less than the ids say (a stop string cut it, the client left) or something
  // else than a reply (an end-of-sentence inside, which ignore_eos lets through).
  std::optional<std::vector<int32_t>> WholeReplyIds() const {
    if (cutter_.stopped() || client_gone_) return std::nullopt;
    std::vector<int32_t> ids = out_ids_;
    if (!ids.empty() && ids.back() == kEosId) ids.pop_back();
    if (ids.empty() || ids.size() > kMaxReplyRecordIds) return std::nullopt;
    if (std::find(ids.begin(), ids.end(), kEosId) != ids.end()) return std::nullopt;
    return ids;
  }

 private:
  Json Object(const char* object, Json choice) const {
    return Json{{"id", id_},       {"object", object}, {"created", created_},
                {"model", model_}, {"choices", Json::array({std::move(choice)})}};
  }

  void Send(Json choice) {
    client_gone_ = !sink_(Object(chat_ ? "chat.completion.chunk" : "text_completion", std::move(choice)));
  }

  // Released text goes to the reply parser (chat) or straight out (completions).
  void Emit(const std::string& text, bool final) {
    chat::ReplyDelta d;
    if (chat_) {
      if (!text.empty()) d = parser_.Feed(text);
      if (final) {
        chat::ReplyDelta f = parser_.Finish();
        d.reasoning_delta += f.reasoning_delta;
        d.content_delta += f.content_delta;
        d.tool_calls.insert(d.tool_calls.end(), f.tool_calls.begin(), f.tool_calls.end());
      }
    } else {
      d.content_delta = text;
    }
    reasoning_ += d.reasoning_delta;
    content_ += d.content_delta;
    const size_t first_call = calls_.size();
    calls_.insert(calls_.end(), d.tool_calls.begin(), d.tool_calls.end());
    if (!stream_ || d.empty() || client_gone_) return;
    if (!chat_) {
      Send({{"index", 0}, {"text", d.content_delta}, {"logprobs", TakeLogprobs()}, {"finish_reason", nullptr}});
      return;
    }
    Json delta = Json::object();
    if (!d.reasoning_delta.empty()) delta["reasoning_content"] = d.reasoning_delta;
    if (!d.content_delta.empty()) delta["content"] = d.content_delta;
    if (!d.tool_calls.empty()) delta["tool_calls"] = ToolCallsJson(d.tool_calls, first_call);
    Send({{"index", 0}, {"delta", delta}, {"logprobs", TakeLogprobs()}, {"finish_reason", nullptr}});
  }

  // A token's bytes as OpenAI shows them: the text (invalid UTF-8 becomes U+FFFD on the wire) and
  // the exact bytes, which a client joins across tokens that split a character.
  Json TokenBytesJson(int32_t id) const {
    const std::string_view b = tok_.TokenBytes(id);
    Json bytes = Json::array();
    for (unsigned char c : b) bytes.push_back(static_cast<int>(c));
    return bytes;
  }

  // One generated token's entry: chat's {token, logprob, bytes, top_logprobs}, or the columns of a
  // completion's legacy logprobs object (its top_logprobs also hold the chosen token, as OpenAI's do).
  void AddLogprob(int32_t id, const TokenLogprob& lp) {
    const std::string text = LogprobTokenText(tok_.TokenBytes(id));
    if (chat_) {
      Json top = Json::array();
      for (const auto& [t, l] : lp.top) {
        top.push_back({{"token", LogprobTokenText(tok_.TokenBytes(t))}, {"logprob", l}, {"bytes", TokenBytesJson(t)}});
      }
      pending_lp_.push_back({{"token", text}, {"logprob", lp.logprob}, {"bytes", TokenBytesJson(id)}, {"top_logprobs", top}});
      return;
    }
    if (pending_lp_.is_null()) {
      pending_lp_ = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                     {"text_offset", Json::array()}};
    }
    Json top = Json::object();
    for (const auto& [t, l] : lp.top) top[LogprobTokenText(tok_.TokenBytes(t))] = l;
    top[text] = lp.logprob;
    pending_lp_["tokens"].push_back(text);
    pending_lp_["token_logprobs"].push_back(lp.logprob);
    pending_lp_["top_logprobs"].push_back(std::move(top));
    pending_lp_["text_offset"].push_back(text_offset_);
    text_offset_ += static_cast<int64_t>(tok_.TokenBytes(id).size());
  }

  // The entries not yet sent, in the choice's "logprobs" shape (null when the request asked none).
  Json TakeLogprobs() {
    if (!logprobs_) return nullptr;
    Json out;
    if (chat_) {
      out = {{"content", pending_lp_.is_null() ? Json::array() : std::move(pending_lp_)}, {"refusal", nullptr}};
    } else {
      out = pending_lp_.is_null() ? Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()},
                                         {"top_logprobs", Json::array()}, {"text_offset", Json::array()}}
                                  : std::move(pending_lp_);
    }
    pending_lp_ = nullptr;
    return out;
  }

  const ChunkSink& sink_;
  const bool chat_, thinking_, stream_, logprobs_;
  const std::string id_, model_;
  const int64_t created_;
  const Tokenizer& tok_;
  StreamDecoder detok_;
  StopCutter cutter_;
  chat::ReplyStreamParser parser_;
  std::string reasoning_, content_;
  std::vector<chat::ToolCall> calls_;
  std::vector<int32_t> out_ids_;
  Json pending_lp_;          // log-probability entries not yet sent (chat: an array; completions: columns)
  int64_t text_offset_ = 0;  // completions: bytes of the tokens listed so far
  bool client_gone_ = false;
};

// The outcome of a routed request whose reply streamed through `reply`; a chat reply is recorded in
// `replies` when `rendered` is given.
ApiOutcome FinishReply(ReplyStream& reply, const RouteResult& r, const ReplyRecords* replies,
                       const chat::ReplySpans* rendered, const std::string& tenant_salt,
                       const std::vector<int32_t>& shown_prompt, bool return_ids) {
  if (!r.status.ok() && r.usage.completion_tokens == 0) {
    ApiOutcome refused = OpenAiApi::FromStatus(r.status);
    if (r.retry_after_s > 0) refused.retry_after_s = r.retry_after_s;  // the router's own estimate
    return refused;
  }
  reply.Finish();
  if (!r.status.ok()) return OpenAiApi::FromStatus(r.status);  // after some output: the stream ends with the error
  if (rendered != nullptr) {
    // Recorded before the last chunk goes out, so the client's next turn finds it. A reply that
    // cannot be recorded costs the next turn only its cache hit through this reply.
    if (std::optional<std::vector<int32_t>> ids = reply.WholeReplyIds()) {
      auto digest = chat::GeneratedReplyDigest(*rendered, reply.Message());
      if (digest.ok()) (void)replies->Record(tenant_salt, *digest, *ids);
    }
  }
  return reply.Respond(r, shown_prompt, return_ids);
}

}  // namespace

std::optional<ApiOutcome> OpenAiApi::CheckRequest(const ApiContext& ctx, const Json& body,
                                                  const std::vector<int32_t>& prompt) const {
  if (body.contains("model") && !body["model"].is_string()) {
    return Error(StatusCode::kInvalidArgument, "\"model\" must be a string", "model");
  }
  if (body.contains("model") && body["model"] != model_id_) {
    return Error(StatusCode::kNotFound,
                 "the model " + body["model"].dump() + " does not exist; this server has " + model_id_, "model",
                 "model_not_found");
  }
  // One choice per request: agent frameworks ask for one (n absent, null or 1), and n samples
  // would multiply decode work behind one request's admission and deadline (docs/session_reuse.md).
  if (body.contains("n") && !body["n"].is_null() && body["n"] != 1) {
    return Error(StatusCode::kInvalidArgument, "\"n\" must be 1: this server returns one choice per request", "n");
  }
  if (prompt.empty()) return Error(StatusCode::kInvalidArgument, "the prompt is empty", "prompt");
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (n >= max_context_) {
    return Error(StatusCode::kInvalidArgument,
                 "the prompt has " + std::to_string(n) + " tokens; this model's context is " + std::to_string(max_context_),
                 "messages", "context_length_exceeded");
  }
  if (ctx.tenant.max_prompt_tokens > 0 && n > ctx.tenant.max_prompt_tokens) {
    return Error(StatusCode::kInvalidArgument,
                 "the prompt has " + std::to_string(n) + " tokens; tenant " + ctx.tenant.name + " may send at most " +
                     std::to_string(ctx.tenant.max_prompt_tokens),
                 "messages", "context_length_exceeded");
  }
  return std::nullopt;
}

void OpenAiApi::Run(const ApiContext& ctx, const Json& body, PreparedRequest p, ChunkSink sink, ApiDone done) {
  if (std::optional<ApiOutcome> refused = CheckRequest(ctx, body, p.prompt)) return Refuse(ctx, std::move(*refused), done);
  RequestSampling& s = p.sampling;
  // max_tokens is capped at what the context leaves, and defaults to that, at most 1024.
  const int64_t left = max_context_ - static_cast<int64_t>(p.prompt.size());
  s.decode.max_tokens = static_cast<uint32_t>(std::min<int64_t>(s.max_tokens_asked > 0 ? s.max_tokens_asked : 1024, left));
  const std::string session = SessionId(ctx, body, p.prompt);
  RouteRequest rq = BuildRouteRequest(ctx, p.chat_mode, session, std::move(p.prompt), s);
  rq.images = std::move(p.images);
  // What the reply's end needs, kept while it streams (no thread waits for it).
  struct Running {
    ChunkSink sink;
    std::optional<ReplyStream> reply;
    ApiDone done;
    chat::ReplySpans rendered;
    bool record_reply = false;
    bool return_ids = false;
    std::vector<int32_t> shown_prompt;  // for return_token_ids: the model's ids (image spans hold the image token)
    std::string tenant_salt;
    std::string tenant;
  };
  auto run = std::make_shared<Running>();
  run->sink = std::move(sink);
  run->done = std::move(done);
  run->rendered = std::move(p.rendered);
  run->record_reply = p.record_reply;
  run->return_ids = body.contains("return_token_ids") && body["return_token_ids"] == true;
  if (run->return_ids) {
    run->shown_prompt = rq.tokens;
    for (int32_t& t : run->shown_prompt)
      if (t < 0) t = images_.image_token_id;
  }
  run->tenant_salt = ctx.tenant.salt;
  run->tenant = ctx.tenant.name;
  if (limits_ != nullptr) limits_->Charge(run->tenant, TenantLimits::Tokens::kPrompt, static_cast<int64_t>(rq.tokens.size()));
  run->reply.emplace(*tok_, s, p.chat_mode, p.thinking, run->sink, rq.request_id, model_id_);
  core_->Start(
      std::move(rq), [run](const GeneratedTokens& got) { return run->reply->Add(got); },
      [this, run](RouteResult r) {
        if (limits_ != nullptr) limits_->Charge(run->tenant, TenantLimits::Tokens::kCompletion, r.usage.completion_tokens);
        ApiOutcome out;
        try {
          out = FinishReply(run->reply.value(), r, replies_, run->record_reply ? &run->rendered : nullptr,
                            run->tenant_salt, run->shown_prompt, run->return_ids);
        } catch (const std::exception& e) {
          // A bug must cost one request, never the router.
          out = Error(StatusCode::kInternal, std::string("internal error: ") + e.what());
        }
        ApiDone d = std::move(run->done);
        run->sink = nullptr;
        d(std::move(out));
      });
}

}  // namespace ds41
