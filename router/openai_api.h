// OpenAiApi: the OpenAI-shaped operations over RouterCore, shared by the HTTP front door and the
// gRPC Router service. Chat requests are validated, rendered to the DSML chat format, tokenized
// (message text can never open markup: it is encoded without control-token matching), routed, and
// the generated ids are detokenized, cut at stop strings and parsed back into content,
// reasoning_content and tool_calls. Errors are OpenAI's JSON error shape with an HTTP status.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <nlohmann/json.hpp>
#include <string>

#include "router/router_core.h"
#include "router/tenants.h"
#include "tokenizer/tokenizer.h"

namespace ds41 {
using Json = nlohmann::ordered_json;  // key order is kept: tool schemas render as the client wrote them
}

namespace ds41 {

inline constexpr int kMaxJsonDepth = 256;

// Parses a request body; nullopt when it is not JSON or nests deeper than kMaxJsonDepth.
std::optional<Json> ParseRequestJson(std::string_view text);

struct ApiOutcome {
  int http_status = 200;
  Json body;   // the response object, or {"error": {...}}
  int retry_after_s = 0; // with 429/503
};

// A streamed chunk (chat.completion.chunk or text_completion); returning false cancels.
using ChunkSink = std::function<bool(const Json& chunk)>;

struct ApiContext {
  Tenant tenant;
  std::string session_id;                  // x-session-id header; falls back to the body's "user"
  std::shared_ptr<CancelToken> cancel;
};

class OpenAiApi {
 public:
  // `model_vocab`: ids a prompt may hold (the model's vocabulary, which the tokenizer may not fill).
  OpenAiApi(RouterCore* core, const Tokenizer* tokenizer, std::string model_id, int64_t max_context_tokens,
            int32_t model_vocab);

  // `sink` is used when the body asks for "stream": true; the outcome then carries the status (and,
  // on success, the usage) and its body is not sent.
  ApiOutcome ChatCompletions(const ApiContext& ctx, const Json& body, const ChunkSink& sink);
  ApiOutcome Completions(const ApiContext& ctx, const Json& body, const ChunkSink& sink);
  Json Models() const;

  static ApiOutcome Error(int http_status, const std::string& type, const std::string& message,
                          const std::string& param = "", const std::string& code = "");
  static ApiOutcome FromStatus(const Status& s);

 private:
  struct Sampling;
  ApiOutcome Run(const ApiContext& ctx, const Json& body, std::vector<int32_t> prompt, bool chat, bool thinking,
                 const ChunkSink& sink);

  RouterCore* core_;
  const Tokenizer* tok_;
  std::string model_id_;
  int64_t max_context_;
  int32_t model_vocab_;
  int64_t created_;
};

}  // namespace ds41
