// Surface: the JSON body of every OpenAI endpoint, as the HTTP front door and the gRPC Router
// service hand it to OpenAiApi (router/openai_api.h): ParseRequestJson (depth limit), then
// ChatCompletions (messages, tools, thinking, reasoning_effort: rendered to DSML and tokenized)
// or Completions (a string or token-id prompt), and the sampling fields, down to RouterCore,
// which has no node and refuses (fuzz/front_door.h). Mutations stay inside the JSON, which the
// HTTP harness's framing would mostly break.
//
// Input: byte 0 picks the endpoint (bit 0: chat or completions), the tenant (bits 1-2: open
// context, k1 with its 64-token limit, k2, no tenant) and whether a session id is given (bit 3);
// the rest is the body.
// Properties: no crash or exception; every refusal is an error body with an HTTP status of 4xx or
// 5xx, and one that passes validation ends UNAVAILABLE (no node), never 200.
#include "fuzz/front_door.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ds41::fuzz::FrontDoor& door = ds41::fuzz::FrontDoor::Get();
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::optional<ds41::Json> body = ds41::ParseRequestJson(text);
  if (!body) return 0;

  ds41::ApiContext ctx;
  switch ((mode >> 1) & 3) {
    case 1: ctx.tenant = *door.tenants.Resolve("Bearer k1"); break;
    case 2: ctx.tenant = *door.tenants.Resolve("k2"); break;
    default: break;  // no tenant: the open router's
  }
  if (mode & 8) ctx.session_id = "session-1";
  ctx.cancel = std::make_shared<ds41::CancelToken>();
  int chunks = 0;
  const ds41::ChunkSink sink = [&](const ds41::Json& chunk) {
    DS41_FUZZ_CHECK(chunk.is_object());
    (void)ds41::WireJson(chunk);  // what the front door sends: must not throw on any text
    return ++chunks < 1000;
  };
  const ds41::ApiOutcome out = (mode & 1) ? door.api.ChatCompletions(ctx, *body, sink)
                                          : door.api.Completions(ctx, *body, sink);
  DS41_FUZZ_CHECK(!out.status.ok());  // no node: nothing can succeed
  DS41_FUZZ_CHECK(out.http_status >= 400 && out.http_status < 600);
  DS41_FUZZ_CHECK(out.body.contains("error"));
  (void)ds41::WireJson(out.body);
  return 0;
}
