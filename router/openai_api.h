// OpenAiApi: the OpenAI-shaped operations over RouterCore, shared by the HTTP front door and the
// gRPC Router service. Chat requests are validated, rendered to the DSML chat format, tokenized
// (message text can never open markup: it is encoded without control-token matching), routed, and
// the generated ids are detokenized, cut at stop strings and parsed back into content,
// reasoning_content and tool_calls. Errors are OpenAI's JSON error shape with an HTTP status.
// Thread-safe: every call keeps its state on its own stack; the tokenizer and RouterCore are shared.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_render.h"
#include "router/image_inputs.h"
#include "router/reply_records.h"
#include "router/router_core.h"
#include "router/tenant_limits.h"
#include "router/tenants.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace ds41 {
using Json = nlohmann::ordered_json;  // key order is kept: tool schemas render as the client wrote them
}

namespace ds41 {

inline constexpr int kMaxJsonDepth = 256;

// Parses a request body; nullopt when it is not JSON or nests deeper than kMaxJsonDepth.
std::optional<Json> ParseRequestJson(std::string_view text);

// An answer for either front door. The HTTP one sends http_status, body and Retry-After; the gRPC
// one returns `status` as it is, so an error keeps its code (no detour through the HTTP status).
struct ApiOutcome {
  Status status;          // OK, or the error; http_status and retry_after_s follow from its code
  int http_status = 200;
  Json body;              // the response object, or {"error": {...}}
  int retry_after_s = 0;  // > 0: send Retry-After (util/error_table.h says which codes)
};

// A streamed chunk (chat.completion.chunk or text_completion); returning false cancels.
using ChunkSink = std::function<bool(const Json& chunk)>;
// Gets a request's outcome, once, after its last chunk.
using ApiDone = std::function<void(ApiOutcome outcome)>;

struct ApiContext {
  Tenant tenant;
  std::string session_id;                  // x-session-id header; falls back to the body's "user"
  std::shared_ptr<CancelToken> cancel;
  // The client's deadline (x-request-timeout or x-stainless-timeout seconds on HTTP, the call's
  // deadline on gRPC); max: none, the router's --request-timeout-seconds applies.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // When the front door first saw the request (TTFT counts from here), and its place among the
  // router's max_running taken then (OpenAiApi::Admit); null: taken when it is routed.
  std::chrono::steady_clock::time_point arrival{};
  std::shared_ptr<RouteAdmission> admission;
};

// A generated token as logprobs show it: its text when its bytes are valid UTF-8, else OpenAI's
// "bytes:\xNN..." form, so tokens that split a character stay distinct (the "bytes" field has them).
std::string LogprobTokenText(std::string_view bytes);

// The deadline a client's timeout header asks for: "" -> none (max); a number of seconds > 0;
// anything else INVALID_ARGUMENT.
StatusOr<std::chrono::steady_clock::time_point> DeadlineFromTimeoutHeader(std::string_view seconds);

// A request's generation options, as ParseSampling (openai_api.cc) reads them from the body.
struct RequestSampling {
  GenerateSampling decode;  // temperature, top_p, seed, penalties, logit_bias, logprobs, constraints
  uint32_t max_tokens_asked = 0;  // max_tokens or max_completion_tokens; 0: not given (Run caps either)
  std::vector<std::string> stops;
  bool stream = false;
  bool ignore_eos = false;  // vLLM's extension: EOS does not stop, so exactly max_tokens come (load tests)
  bool tool_calls = true;   // false: tool_choice "none", a calls block the model writes stays content
};

class OpenAiApi {
 public:
  // `model_vocab`: ids a prompt may hold (the model's vocabulary, which the tokenizer may not fill).
  // `replies`: where chat replies' generated ids are recorded and found again (nullptr: chat
  // prompts are always re-tokenized, as without a cache).
  OpenAiApi(RouterCore* core, const Tokenizer* tokenizer, std::string model_id, int64_t max_context_tokens,
            int32_t model_vocab, const ReplyRecords* replies = nullptr);

  // A place for a request of `tenant` that has just arrived: one of its tenant's own (SetTenantLimits)
  // and one among the router's max_running (RouterCore::Admit); or its refusal (429 naming the
  // limit, with Retry-After as the error table gives it or, for a tenant's quota, as long as it
  // lasts; 503 while the router drains).
  std::optional<ApiOutcome> Admit(const Tenant& tenant, std::shared_ptr<RouteAdmission>* admission);
  // Per-tenant quotas (nullptr: none). REQUIRES: called before serving, not concurrently with requests.
  void SetTenantLimits(TenantLimits* limits) { limits_ = limits; }

  // `sink` is used when the body asks for "stream": true; the outcome then carries the status (and,
  // on success, the usage) and its body is not sent. The request is checked, rendered and
  // tokenized on this thread; then no thread waits for it: chunks and `done` come on gRPC's or the
  // router's worker threads (`done` on this one when it is refused first). Neither may block.
  void ChatCompletions(const ApiContext& ctx, const Json& body, ChunkSink sink, ApiDone done);
  void Completions(const ApiContext& ctx, const Json& body, ChunkSink sink, ApiDone done);
  // The front doors' entry: ChatCompletions (chat) or Completions, and a bug's exception costs this
  // request only (its admission given back, `done` told INTERNAL), never the router.
  void Serve(bool chat, const ApiContext& ctx, const Json& body, ChunkSink sink, ApiDone done);
  // The same, waited for on this thread (tests, fuzzers).
  ApiOutcome ChatCompletions(const ApiContext& ctx, const Json& body, const ChunkSink& sink);
  // Image inputs (off by default: image parts are then answered 400 "this model does not accept
  // images"). REQUIRES: called before serving, not concurrently with requests.
  void SetImageInput(const ImageInputOptions& options) { images_ = options; }
  ApiOutcome Completions(const ApiContext& ctx, const Json& body, const ChunkSink& sink);
  Json Models() const;
  bool draining() const;  // the router is shutting down: /health says so

  // An error answer: HTTP status, OpenAI type and code from util/error_table.h, `openai_code`
  // replacing the table's code where OpenAI names the case (model_not_found); `param` names the
  // offending request field. REQUIRES: code is not kOk.
  static ApiOutcome Error(StatusCode code, const std::string& message, const std::string& param = "",
                          const std::string& openai_code = "");
  // Error(s.code(), s.message()); an OK status is an empty 200 answer.
  static ApiOutcome FromStatus(const Status& s);

 private:
  // A request checked and tokenized, ready to route.
  struct PreparedRequest {
    RequestSampling sampling;
    std::vector<int32_t> prompt;
    bool chat_mode = false, thinking = false;
    bool record_reply = false;       // a chat reply to record (replies_ set); `rendered` says where it goes
    chat::ReplySpans rendered;
    std::vector<PromptImage> images;
  };
  // The request's refusal, or nullopt with `out` filled.
  std::optional<ApiOutcome> PrepareChat(const ApiContext& ctx, const Json& body, PreparedRequest* out) const;
  std::optional<ApiOutcome> PrepareCompletion(const Json& body, PreparedRequest* out) const;
  // Hands `out` to `done`, releasing the request's admission first.
  static void Refuse(const ApiContext& ctx, ApiOutcome out, const ApiDone& done);
  // Refuses what this server cannot serve (another model, n != 1, an empty prompt, one longer than the
  // context or than the tenant's max_prompt_tokens).
  std::optional<ApiOutcome> CheckRequest(const ApiContext& ctx, const Json& body, const std::vector<int32_t>& prompt) const;
  // The ids of a rendered chat prompt: control pieces by id, text without control matching, and
  // each assistant span whose reply this cluster recorded as the ids the model generated.
  StatusOr<std::vector<int32_t>> ChatPromptIds(const std::vector<chat::PromptPiece>& pieces,
                                               const std::vector<chat::AssistantSpan>& spans,
                                               const std::string& tenant_salt) const;
  // Routes a prepared request; its reply streams through ReplyStream to `sink`, then `done`.
  void Run(const ApiContext& ctx, const Json& body, PreparedRequest p, ChunkSink sink, ApiDone done);

  RouterCore* core_;
  const Tokenizer* tok_;
  std::string model_id_;
  int64_t max_context_;
  int32_t model_vocab_;
  const ReplyRecords* replies_;
  ImageInputOptions images_;
  TenantLimits* limits_ = nullptr;
  int64_t created_;
};

}  // namespace ds41
