// Surface: the model's reply text as the DSML reply parser (chat/reply_parser.h) reads it: the
// model is not trusted to write well-formed markup (thinking end, tool-call blocks, parameters,
// end of sentence), and a prompt can steer it to write anything.
//
// Input: byte 0 bit 0 is thinking mode; bits 1-7 seed the chunking; the rest is the reply.
// Properties (the header's contract): no crash; streamed in any chunking, the deltas concatenate
// to ParseReply's one-shot result (reasoning, content, tool calls, finish hint); every tool
// call's arguments is a JSON object when the reply is valid UTF-8 (all the parser is given).
#include <nlohmann/json.hpp>

#include "chat/reply_parser.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool thinking = data[0] & 1;
  uint32_t seed = data[0] >> 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const ds41::chat::ParsedReply whole = ds41::chat::ParseReply(text, thinking);
  // The parser only ever sees valid UTF-8 (the router's StreamDecoder turns bad bytes into
  // U+FFFD), and JSON cannot hold anything else, so arguments are checked on that domain.
  for (const auto& call : whole.tool_calls) {
    if (!ds41::fuzz::ValidUtf8(text)) break;
    const auto args = nlohmann::json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    DS41_FUZZ_CHECK(!args.is_discarded() && args.is_object());
  }

  // Chunks of 1..8 bytes, sizes from a tiny LCG over the seed (a token is a few bytes).
  ds41::chat::ReplyStreamParser parser(thinking);
  ds41::chat::ParsedReply streamed;
  auto add = [&](const ds41::chat::ReplyDelta& d) {
    streamed.reasoning_content += d.reasoning_delta;
    streamed.content += d.content_delta;
    streamed.tool_calls.insert(streamed.tool_calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  };
  for (size_t at = 0; at < text.size();) {
    seed = seed * 1103515245u + 12345u;
    const size_t n = std::min<size_t>(text.size() - at, 1 + (seed >> 16) % 8);
    add(parser.Feed(text.substr(at, n)));
    at += n;
  }
  add(parser.Finish());
  streamed.finish = parser.finish_hint();
  DS41_FUZZ_CHECK(streamed.reasoning_content == whole.reasoning_content);
  DS41_FUZZ_CHECK(streamed.content == whole.content);
  DS41_FUZZ_CHECK(streamed.tool_calls == whole.tool_calls);
  DS41_FUZZ_CHECK(streamed.finish == whole.finish);
  return 0;
}
