#include "chat/chat_render.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "chat/control_tokens.h"
#include "chat/python_json.h"
#include "util/sha256.h"

namespace ds41::chat {
namespace {

using Json = nlohmann::ordered_json;

// The release's TOOLS_TEMPLATE with the V4.1 tag names substituted; the schemas go between the
// two halves (they are request data, so they are appended as text, not as template).
constexpr std::string_view kToolsHead =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools "
    "by writing a \"<｜DSML｜ calls>\" block like the following:\n\n"
    "<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜ parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
    "</｜DSML｜ parameter>\n"
    "...\n"
    "</｜DSML｜ invoke>\n"
    "<｜DSML｜ invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types "
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning "
    "inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n";

enum class Role { kSystem, kUser, kAssistant };

struct ToolCallIn {
  std::string id;
  std::string name;
  Json arguments;  // always an object
};

struct Block {
  bool tool_result = false;
  std::string text;
  std::string tool_call_id;
  std::vector<size_t> images;  // offsets in `text` where an image placeholder goes, ascending
};

struct Msg {
  Role role = Role::kUser;
  std::string content;           // system / assistant
  std::string reasoning;         // assistant
  std::vector<ToolCallIn> calls;  // assistant
  std::vector<Block> blocks;     // user (text and tool results, merged)
  std::string tools_text;        // first system message only: the rendered schemas
};

Status Bad(const std::string& field, std::string_view what) {
  return InvalidArgumentError(field + ": " + std::string(what));
}

// An image_url part: {"image_url": {"url": "...", "detail": "..."}} or {"image_url": "..."}.
StatusOr<ChatImage> ImagePart(const Json& part, const std::string& field) {
  ChatImage image;
  image.field = field;
  auto iu = part.find("image_url");
  if (iu != part.end() && iu->is_string()) {
    image.url = iu->get<std::string>();
  } else if (iu != part.end() && iu->is_object()) {
    auto url = iu->find("url");
    if (url == iu->end() || !url->is_string()) return Bad(field + ".image_url.url", "must be a string");
    image.url = url->get<std::string>();
    auto detail = iu->find("detail");
    if (detail != iu->end() && !detail->is_null()) {
      if (!detail->is_string()) return Bad(field + ".image_url.detail", "must be a string");
      image.detail = detail->get<std::string>();
    }
  } else {
    return Bad(field + ".image_url", "must be an object with a url");
  }
  if (image.url.empty()) return Bad(field + ".image_url.url", "must not be empty");
  return image;
}

// Content as a string, null, or an array of {type:"text", text} parts joined by a blank line, as
// the release's process_image_messages does. When `images` is given (user messages), image_url
// parts are accepted too: each is a part of its own whose place in the text is recorded in
// `image_at` (an offset) and whose url is appended to `images`.
StatusOr<std::string> ContentText(const Json& msg, const std::string& field,
                                  std::vector<ChatImage>* images = nullptr, std::vector<size_t>* image_at = nullptr) {
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return Bad(field, "must be a string or an array of content parts");
  std::string out;
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& part = (*it)[i];
    std::string pf = field + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return Bad(pf, "must be an object");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return Bad(pf + ".type", "must be a string");
    if (i > 0) out += "\n\n";
    if (*type == "image_url") {
      if (images == nullptr) return Bad(pf + ".type", "image parts are not supported here (only in user messages)");
      DS41_ASSIGN_OR_RETURN(ChatImage image, ImagePart(part, pf));
      images->push_back(std::move(image));
      image_at->push_back(out.size());
      continue;
    }
    if (*type != "text") {
      return Bad(pf + ".type", images != nullptr ? "only \"text\" and \"image_url\" parts are supported"
                                                 : "only \"text\" parts are supported");
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) return Bad(pf + ".text", "must be a string");
    out += text->get<std::string>();
  }
  return out;
}

StatusOr<std::string> OptionalString(const Json& obj, const char* key, const std::string& field) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Bad(field, "must be a string");
  return it->get<std::string>();
}

StatusOr<std::vector<ToolCallIn>> ParseToolCalls(const Json& msg, const std::string& field) {
  std::vector<ToolCallIn> calls;
  auto it = msg.find("tool_calls");
  if (it == msg.end() || it->is_null()) return calls;
  if (!it->is_array()) return Bad(field, "must be an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& tc = (*it)[i];
    std::string f = field + "[" + std::to_string(i) + "]";
    if (!tc.is_object()) return Bad(f, "must be an object");
    ToolCallIn call;
    DS41_ASSIGN_OR_RETURN(call.id, OptionalString(tc, "id", f + ".id"));
    auto type = tc.find("type");
    if (type != tc.end() && !type->is_null() && *type != "function") {
      return Bad(f + ".type", "must be \"function\"");
    }
    auto fn = tc.find("function");
    if (fn == tc.end() || !fn->is_object()) return Bad(f + ".function", "must be an object");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      return Bad(f + ".function.name", "must be a non-empty string");
    }
    call.name = name->get<std::string>();
    auto args = fn->find("arguments");
    std::string af = f + ".function.arguments";
    if (args == fn->end() || args->is_null()) {
      call.arguments = Json::object();
    } else if (args->is_object()) {
      call.arguments = *args;  // lenient: some clients send the object itself
    } else if (args->is_string()) {
      const std::string& s = args->get_ref<const std::string&>();
      if (s.find_first_not_of(" \t\r\n") == std::string::npos) {
        call.arguments = Json::object();  // "" means no arguments
      } else {
        call.arguments = Json::parse(s, nullptr, /*allow_exceptions=*/false);
        // As the release's encoder does with arguments json.loads cannot read: one "arguments"
        // parameter holding the raw text (a model's malformed call can still be sent back).
        if (call.arguments.is_discarded()) call.arguments = Json{{"arguments", s}};
        if (!call.arguments.is_object()) return Bad(af, "must be a JSON object");
      }
    } else {
      return Bad(af, "must be a JSON string");
    }
    calls.push_back(std::move(call));
  }
  return calls;
}

StatusOr<std::string> RenderToolSchemas(const Json& tools) {
  std::string out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& tool = tools[i];
    std::string f = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) return Bad(f, "must be an object");
    auto type = tool.find("type");
    if (type == tool.end() || *type != "function") return Bad(f + ".type", "must be \"function\"");
    auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object()) return Bad(f + ".function", "must be an object");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      return Bad(f + ".function.name", "must be a non-empty string");
    }
    auto desc = fn->find("description");
    if (desc != fn->end() && !desc->is_string() && !desc->is_null()) {
      return Bad(f + ".function.description", "must be a string");
    }
    auto params = fn->find("parameters");
    if (params != fn->end() && !params->is_object() && !params->is_null()) {
      return Bad(f + ".function.parameters", "must be an object");
    }
    if (i > 0) out += "\n";
    out += PythonJsonDumps(*fn);  // the release renders tool["function"] as given
  }
  return out;
}

// Validates and normalizes the request into the release's message list: tool messages become
// tool_result blocks of a user message, consecutive user/tool messages merge into one.
// `images`: where the user messages' image parts go; null refuses them.
StatusOr<std::vector<Msg>> Normalize(const Json& messages, std::vector<ChatImage>* images) {
  if (!messages.is_array()) return Bad("messages", "must be an array");
  if (messages.empty()) return Bad("messages", "must not be empty");
  std::vector<Msg> out;
  const std::vector<ToolCallIn>* open_calls = nullptr;  // the latest assistant's tool calls
  std::vector<std::vector<ToolCallIn>> call_store;
  call_store.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    std::string f = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Bad(f, "must be an object");
    auto role_it = m.find("role");
    if (role_it == m.end() || !role_it->is_string()) return Bad(f + ".role", "must be a string");
    const std::string role = role_it->get<std::string>();
    bool merge_user = !out.empty() && out.back().role == Role::kUser;
    if (role == "system" || role == "developer") {
      Msg msg;
      msg.role = Role::kSystem;
      DS41_ASSIGN_OR_RETURN(msg.content, ContentText(m, f + ".content"));
      out.push_back(std::move(msg));
    } else if (role == "user") {
      Block b;
      DS41_ASSIGN_OR_RETURN(b.text, ContentText(m, f + ".content", images, &b.images));
      if (!merge_user) out.push_back(Msg{});
      out.back().blocks.push_back(std::move(b));
    } else if (role == "assistant") {
      Msg msg;
      msg.role = Role::kAssistant;
      DS41_ASSIGN_OR_RETURN(msg.content, ContentText(m, f + ".content"));
      DS41_ASSIGN_OR_RETURN(msg.reasoning,
                            OptionalString(m, "reasoning_content", f + ".reasoning_content"));
      DS41_ASSIGN_OR_RETURN(msg.calls, ParseToolCalls(m, f + ".tool_calls"));
      if (!msg.calls.empty()) {
        call_store.push_back(msg.calls);
        open_calls = &call_store.back();
      }
      out.push_back(std::move(msg));
    } else if (role == "tool") {
      if (open_calls == nullptr) return Bad(f, "tool message without a preceding tool call");
      Block b;
      b.tool_result = true;
      DS41_ASSIGN_OR_RETURN(b.tool_call_id, OptionalString(m, "tool_call_id", f + ".tool_call_id"));
      bool known = std::any_of(open_calls->begin(), open_calls->end(),
                               [&](const ToolCallIn& c) { return c.id == b.tool_call_id; });
      if (!known) return Bad(f + ".tool_call_id", "matches no call of the preceding assistant");
      DS41_ASSIGN_OR_RETURN(b.text, ContentText(m, f + ".content"));
      if (!merge_user) out.push_back(Msg{});
      out.back().blocks.push_back(std::move(b));
    } else {
      return Bad(f + ".role", "unknown role \"" + role + "\"");
    }
  }
  return out;
}

// A user text block with its image placeholders (control pieces, never text) in place.
void RenderUserText(const Block& b, std::vector<PromptPiece>& p) {
  size_t at = 0;
  for (size_t offset : b.images) {
    AppendText(p, std::string_view(b.text).substr(at, offset - at));
    AppendControl(p, kImage);
    at = offset;
  }
  AppendText(p, std::string_view(b.text).substr(at));
}

// The release's sort_tool_results_by_call_order: within one user message, tool results take
// their slots in the order of the latest assistant's calls (stable; unknown ids rank 0).
void SortToolResults(std::vector<Msg>& msgs) {
  std::map<std::string, int> order;
  for (Msg& m : msgs) {
    if (m.role == Role::kAssistant && !m.calls.empty()) {
      order.clear();
      for (size_t i = 0; i < m.calls.size(); ++i) {
        if (!m.calls[i].id.empty()) order.emplace(m.calls[i].id, static_cast<int>(i));
      }
    } else if (m.role == Role::kUser) {
      std::vector<Block> results;
      for (const Block& b : m.blocks) {
        if (b.tool_result) results.push_back(b);
      }
      if (results.size() < 2 || order.empty()) continue;
      auto rank = [&](const Block& b) {
        auto it = order.find(b.tool_call_id);
        return it == order.end() ? 0 : it->second;
      };
      std::stable_sort(results.begin(), results.end(),
                       [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
      size_t next = 0;
      for (Block& b : m.blocks) {
        if (b.tool_result) b = results[next++];
      }
    }
  }
}

void RenderToolCalls(const std::vector<ToolCallIn>& calls, std::vector<PromptPiece>& p) {
  AppendTemplate(p, "\n\n<｜DSML｜ calls>\n");
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) AppendText(p, "\n");
    AppendTemplate(p, "<｜DSML｜ invoke name=\"");
    AppendText(p, calls[i].name);
    AppendTemplate(p, "\">\n");
    bool first = true;
    for (const auto& [key, value] : calls[i].arguments.items()) {
      if (!first) AppendText(p, "\n");
      first = false;
      AppendTemplate(p, "<｜DSML｜ parameter name=\"");
      AppendText(p, key);
      AppendTemplate(p, value.is_string() ? "\" string=\"true\">" : "\" string=\"false\">");
      AppendText(p, value.is_string() ? value.get<std::string>() : PythonJsonDumps(value));
      AppendTemplate(p, "</｜DSML｜ parameter>");
    }
    AppendTemplate(p, "\n</｜DSML｜ invoke>");
  }
  AppendTemplate(p, "\n</｜DSML｜ calls>");
}

// A JSON value in canonical form: object keys sorted (nlohmann::json keeps a std::map) and numbers
// that are integers written as such, so "1.0" and "1" (what JSON.stringify makes of it) agree.
nlohmann::json Canonical(const Json& v) {
  switch (v.type()) {
    case Json::value_t::object: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, x] : v.items()) o[k] = Canonical(x);
      return o;
    }
    case Json::value_t::array: {
      nlohmann::json a = nlohmann::json::array();
      for (const Json& x : v) a.push_back(Canonical(x));
      return a;
    }
    case Json::value_t::number_float: {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9007199254740992.0) {
        return nlohmann::json(static_cast<int64_t>(d));
      }
      return nlohmann::json(d);
    }
    case Json::value_t::number_unsigned: {
      const uint64_t u = v.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return nlohmann::json(static_cast<int64_t>(u));
      return nlohmann::json(u);
    }
    case Json::value_t::number_integer:
      return nlohmann::json(v.get<int64_t>());
    case Json::value_t::string:
      return nlohmann::json(v.get_ref<const std::string&>());
    case Json::value_t::boolean:
      return nlohmann::json(v.get<bool>());
    default:
      return nlohmann::json(nullptr);
  }
}

void PutLengthPrefixed(Sha256& h, std::string_view bytes) {
  const uint64_t n = bytes.size();
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
  h.Update(b, 8);
  h.Update(bytes);
}

// The context a reply follows: every piece, its kind and its bytes.
void HashPiece(Sha256& h, const PromptPiece& p) {
  const uint8_t kind = p.control ? 1 : 0;
  h.Update(&kind, 1);
  PutLengthPrefixed(h, p.text);
}

// What the rendering of an assistant message depends on (see ReplyDigest). False when an argument
// cannot be written as canonical JSON (then the message is never recognized: it renders as sent).
bool HashIdentity(Sha256& h, const Msg& m, bool reasoning_rendered) {
  static const char kDomain[] = "ds41-reply-identity-v1";
  h.Update(kDomain, sizeof(kDomain));
  const uint8_t mode = reasoning_rendered ? 1 : 0;
  h.Update(&mode, 1);
  PutLengthPrefixed(h, reasoning_rendered ? std::string_view(m.reasoning) : std::string_view());
  PutLengthPrefixed(h, m.content);
  PutLengthPrefixed(h, std::to_string(m.calls.size()));
  for (const ToolCallIn& c : m.calls) {
    std::string args;
    try {
      args = Canonical(c.arguments).dump();
    } catch (const nlohmann::json::exception&) {
      return false;
    }
    PutLengthPrefixed(h, c.name);
    PutLengthPrefixed(h, args);
  }
  return true;
}

ReplyDigest Finish(Sha256 h) {
  const auto d = h.Digest();
  ReplyDigest out;
  std::copy(d.begin(), d.end(), out.begin());
  return out;
}

}  // namespace

StatusOr<int> ParseReasoningEffort(const nlohmann::ordered_json& value) {
  if (value.is_null()) return kDefaultReasoningEffort;
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s == "low") return 50;
    if (s == "high") return 75;
    if (s == "max") return 100;
    return Bad("reasoning_effort", "must be \"low\", \"high\", \"max\" or an integer in [1, 100]");
  }
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v >= 1 && v <= 100) return static_cast<int>(v);
  }
  return Bad("reasoning_effort", "must be \"low\", \"high\", \"max\" or an integer in [1, 100]");
}

StatusOr<std::vector<PromptPiece>> RenderChat(const nlohmann::ordered_json& messages,
                                              const nlohmann::ordered_json& tools,
                                              const ChatRenderOptions& options, ReplySpans* replies,
                                              std::vector<ChatImage>* images) {
  if (options.reasoning_effort < 1 || options.reasoning_effort > 100) {
    return Bad("reasoning_effort", "must be in [1, 100]");
  }
  std::vector<ChatImage> found;
  DS41_ASSIGN_OR_RETURN(std::vector<Msg> msgs, Normalize(messages, images != nullptr ? &found : nullptr));
  bool has_tools = false;
  if (!tools.is_null()) {
    if (!tools.is_array()) return Bad("tools", "must be an array");
    has_tools = !tools.empty();
  }
  if (has_tools) {
    // Tools ride on the first system message; one is created when the request has none.
    if (msgs.front().role != Role::kSystem) {
      Msg system;
      system.role = Role::kSystem;
      msgs.insert(msgs.begin(), std::move(system));
    }
    DS41_ASSIGN_OR_RETURN(msgs.front().tools_text, RenderToolSchemas(tools));
  }
  SortToolResults(msgs);

  const int n = static_cast<int>(msgs.size());
  // A mid-conversation system message counts as a user turn: it gets the generation cue.
  auto is_user_like = [&](int i) {
    return msgs[i].role == Role::kUser || (msgs[i].role == Role::kSystem && i > 0);
  };
  int last_user = -1;
  for (int i = n - 1; i >= 0; --i) {
    if (is_user_like(i)) {
      last_user = i;
      break;
    }
  }
  // With tools defined the release keeps every turn's reasoning.
  const bool drop = options.drop_thinking && !has_tools;

  std::vector<PromptPiece> p;
  struct Pending {
    size_t begin, end;
    int msg;
    bool reasoning_rendered;
  };
  std::vector<Pending> pending;  // assistant messages right after a generation cue
  bool after_cue = false, last_think = false;
  if (options.add_bos) AppendControl(p, kBos);
  for (int i = 0; i < n; ++i) {
    const Msg& m = msgs[i];
    if (i == 0 && (options.thinking || m.role == Role::kSystem)) AppendControl(p, kSystem);
    if (i == 0 && options.thinking) {
      AppendText(p, "Reasoning Effort: " + std::to_string(options.reasoning_effort) +
                        " (range 1-100, the higher the value, the more thorough the reasoning)\n\n");
    }
    switch (m.role) {
      case Role::kSystem:
        if (i > 0) AppendControl(p, kSystem);
        AppendText(p, m.content);
        if (!m.tools_text.empty()) {
          AppendText(p, "\n\n");
          AppendTemplate(p, kToolsHead);
          AppendText(p, m.tools_text);
          AppendTemplate(p, kToolsTail);
        }
        break;
      case Role::kUser:
        AppendControl(p, kUser);
        for (size_t b = 0; b < m.blocks.size(); ++b) {
          if (b > 0) AppendText(p, "\n\n");
          if (m.blocks[b].tool_result) {
            AppendText(p, "<tool_result>" + m.blocks[b].text + "</tool_result>");
          } else {
            RenderUserText(m.blocks[b], p);
          }
        }
        break;
      case Role::kAssistant: {
        // After a cue (a control piece) the message starts a piece of its own; the EOS ends it.
        const size_t begin = p.size();
        const bool reasoning_rendered = options.thinking && (!drop || i > last_user);
        if (reasoning_rendered) {
          AppendText(p, m.reasoning);
          AppendControl(p, kThinkEnd);
        }
        AppendText(p, m.content);
        if (!m.calls.empty()) RenderToolCalls(m.calls, p);
        if (after_cue) pending.push_back({begin, p.size(), i, reasoning_rendered});
        AppendControl(p, kEos);
        break;
      }
    }
    after_cue = false;
    // The generation cue follows a user-like turn that is last or answered by the assistant.
    if (i + 1 < n && msgs[i + 1].role != Role::kAssistant) continue;
    if (!is_user_like(i)) continue;
    AppendControl(p, kAssistant);
    bool think = options.thinking && (!drop || i >= last_user);
    AppendControl(p, think ? kThinkStart : kThinkEnd);
    after_cue = true;
    last_think = think;
  }
  if (replies != nullptr) {
    // One pass over the pieces; each span's digest continues the context hash at its first piece.
    *replies = ReplySpans{};
    size_t next = 0, image = 0;
    // An image placeholder's piece alone does not say which picture it stands for: its url does.
    auto hash_piece = [&](const PromptPiece& piece) {
      HashPiece(replies->prompt, piece);
      if (piece.control && piece.text == kImage && image < found.size()) {
        PutLengthPrefixed(replies->prompt, found[image++].url);
      }
    };
    for (const Pending& s : pending) {
      for (; next < s.begin; ++next) hash_piece(p[next]);
      Sha256 h = replies->prompt;
      if (HashIdentity(h, msgs[s.msg], s.reasoning_rendered)) replies->spans.push_back({s.begin, s.end, Finish(h)});
    }
    for (; next < p.size(); ++next) hash_piece(p[next]);
    if (after_cue) replies->cue = last_think;
  }
  if (images != nullptr) *images = std::move(found);
  return p;
}

StatusOr<ReplyDigest> GeneratedReplyDigest(const ReplySpans& rendered, const nlohmann::ordered_json& message) {
  if (!rendered.cue) return FailedPreconditionError("the prompt does not end in a generation cue");
  DS41_ASSIGN_OR_RETURN(std::vector<Msg> msgs, Normalize(Json::array({message}), nullptr));
  if (msgs.size() != 1 || msgs[0].role != Role::kAssistant) return InvalidArgumentError("not an assistant message");
  Sha256 h = rendered.prompt;
  if (!HashIdentity(h, msgs[0], *rendered.cue)) return InvalidArgumentError("tool-call arguments are not canonical JSON");
  return Finish(h);
}

}  // namespace ds41::chat
