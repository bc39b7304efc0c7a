// Surface: the chat renderer (chat/chat_render.h) on what clients send as "messages", "tools",
// "thinking" and "reasoning_effort": roles, contents (strings, part arrays, null), tool calls with
// string or object arguments, tool results, reasoning content, tool schemas.
//
// Input: byte 0 bit 0 picks the form. JSON form: the rest is a request object (or a bare messages
// array) parsed as JSON. Built form: the rest drives a generator of random message arrays of
// valid shape with hostile contents, which reach the renderer's deeper rules (tool-result merging
// and ordering, dropped reasoning) more often than mutated JSON does. Bits 1-3: thinking,
// drop_thinking, add_bos.
// Properties: no crash or exception; a rendered prompt alternates control tokens and non-empty
// text, and every control piece is one of the vocabulary's control tokens.
#include <nlohmann/json.hpp>

#include "chat/chat_render.h"
#include "chat/control_tokens.h"
#include "fuzz/fuzz_support.h"

namespace {

using Json = nlohmann::ordered_json;
using ds41::fuzz::ByteReader;

// Text that often matters to the renderer and parser: markup, JSON punctuation, invalid UTF-8.
std::string Text(ByteReader& in) {
  static const char* const kPieces[] = {"<｜DSML｜", "</think>", "<think>", "<｜User｜>", "\"", "\\", "{", "}",
                                        "\xff", "\xe2\x82", "\n\n", "</｜DSML｜invoke>", "<tool_result>", ""};
  std::string s = in.String(24);
  if (in.Bool()) s += kPieces[in.Below(std::size(kPieces))];
  return s;
}

Json Value(ByteReader& in, int depth) {
  switch (in.Below(depth > 2 ? 4 : 7)) {
    case 0: return Text(in);
    case 1: return static_cast<int64_t>(in.U32()) - (1 << 20);
    case 2: return in.Bool();
    case 3: return nullptr;
    case 4: return static_cast<double>(in.U32()) / 7.0;
    case 5: {
      Json a = Json::array();
      for (size_t i = in.Below(4); i > 0; --i) a.push_back(Value(in, depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (size_t i = in.Below(4); i > 0; --i) o[Text(in)] = Value(in, depth + 1);
      return o;
    }
  }
}

Json Content(ByteReader& in) {
  switch (in.Below(5)) {
    case 0: return nullptr;
    case 1: {
      Json parts = Json::array();
      for (size_t i = in.Below(3); i > 0; --i)
        parts.push_back(in.Bool() ? Json{{"type", "text"}, {"text", Text(in)}} : Value(in, 1));
      return parts;
    }
    case 2: return Value(in, 1);
    default: return Text(in);
  }
}

Json ToolCalls(ByteReader& in) {
  Json calls = Json::array();
  for (size_t i = in.Below(3); i > 0; --i) {
    Json fn = {{"name", in.Bool() ? "get_weather" : Text(in)}};
    switch (in.Below(3)) {
      case 0:  // as a client serializes them (invalid UTF-8 replaced, as JSON must be)
        fn["arguments"] = Json{{"city", Text(in)}, {"days", Value(in, 1)}}.dump(-1, ' ', false, Json::error_handler_t::replace);
        break;
      case 1: fn["arguments"] = Text(in); break;  // not JSON
      default: fn["arguments"] = Value(in, 1); break;
    }
    Json call = {{"type", "function"}, {"function", fn}};
    if (in.Bool()) call["id"] = "call_" + std::to_string(in.Below(4));
    calls.push_back(call);
  }
  return calls;
}

Json Messages(ByteReader& in) {
  static const char* const kRoles[] = {"system", "user", "assistant", "tool", "developer", "function", ""};
  Json messages = Json::array();
  for (size_t i = 1 + in.Below(8); i > 0 && in.left() > 0; --i) {
    Json m = Json::object();
    const char* role = kRoles[in.Below(std::size(kRoles))];
    if (in.Below(8) != 0) m["role"] = role;
    if (in.Below(8) != 0) m["content"] = Content(in);
    if (std::string_view(role) == "assistant") {
      if (in.Bool()) m["tool_calls"] = ToolCalls(in);
      if (in.Bool()) m["reasoning_content"] = in.Bool() ? Json(Text(in)) : Value(in, 1);
    }
    if (std::string_view(role) == "tool" && in.Bool()) m["tool_call_id"] = "call_" + std::to_string(in.Below(4));
    if (in.Below(16) == 0) m[Text(in)] = Value(in, 1);  // an unknown field
    messages.push_back(m);
  }
  return messages;
}

Json Tools(ByteReader& in) {
  if (in.Below(3) == 0) return nullptr;
  Json tools = Json::array();
  for (size_t i = in.Below(3); i > 0; --i) {
    Json params = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}};
    if (in.Bool()) params = Value(in, 0);
    Json fn = {{"name", in.Bool() ? "get_weather" : Text(in)}, {"parameters", params}};
    if (in.Bool()) fn["description"] = Text(in);
    tools.push_back(in.Below(8) == 0 ? Value(in, 1) : Json{{"type", "function"}, {"function", fn}});
  }
  return tools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  ds41::chat::ChatRenderOptions opt;
  opt.thinking = mode & 2;
  opt.drop_thinking = mode & 4;
  opt.add_bos = mode & 8;
  Json messages, tools = nullptr, effort = nullptr;
  if (mode & 1) {
    Json j = Json::parse(data + 1, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    if (j.is_object()) {
      messages = j.contains("messages") ? j["messages"] : Json(nullptr);
      tools = j.contains("tools") ? j["tools"] : Json(nullptr);
      effort = j.contains("reasoning_effort") ? j["reasoning_effort"] : Json(nullptr);
    } else {
      messages = std::move(j);
    }
  } else {
    ByteReader in(data + 1, size - 1);
    messages = Messages(in);
    tools = Tools(in);
    if (in.Bool()) effort = Value(in, 2);
  }
  if (auto e = ds41::chat::ParseReasoningEffort(effort); e.ok()) {
    DS41_FUZZ_CHECK(*e >= 1 && *e <= 100);
    opt.reasoning_effort = *e;
  }
  auto pieces = ds41::chat::RenderChat(messages, tools, opt);
  if (!pieces.ok()) {
    DS41_FUZZ_CHECK(pieces.status().code() == ds41::StatusCode::kInvalidArgument);
    return 0;
  }
  bool last_text = false;
  for (const ds41::chat::PromptPiece& p : *pieces) {
    if (p.control) {
      DS41_FUZZ_CHECK(ds41::chat::ControlTokenId(p.text).has_value());
      last_text = false;
    } else {
      DS41_FUZZ_CHECK(!p.text.empty() && !last_text);
      last_text = true;
    }
  }
  return 0;
}
