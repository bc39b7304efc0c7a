#include "chat/reply_parser.h"

#include <algorithm>
#include <initializer_list>
#include <optional>

#include <nlohmann/json.hpp>

#include "chat/control_tokens.h"
#include "chat/python_json.h"

namespace ds41::chat {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kCallsOpen = "<｜DSML｜ calls>";
constexpr std::string_view kCallsClose = "</｜DSML｜ calls>";
constexpr std::string_view kInvokeOpen = "<｜DSML｜ invoke name=\"";
constexpr std::string_view kInvokeClose = "</｜DSML｜ invoke>";
constexpr std::string_view kParamOpen = "<｜DSML｜ parameter name=\"";
constexpr std::string_view kParamClose = "</｜DSML｜ parameter>";

// Length of the longest suffix of `s` that is a proper prefix of one of `tags`: text that must be
// held back because the next chunk may complete the tag.
size_t PartialTagSuffix(std::string_view s, std::initializer_list<std::string_view> tags) {
  size_t best = 0;
  for (std::string_view tag : tags) {
    for (size_t len = std::min(s.size(), tag.size() - 1); len > best; --len) {
      if (s.substr(s.size() - len) == tag.substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

// Bytes at the end of `s` that start a UTF-8 sequence not yet complete.
size_t IncompleteUtf8Suffix(std::string_view s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// Position of the first of `tags` in `s` (npos if none) and which one.
size_t FindFirst(std::string_view s, std::initializer_list<std::string_view> tags,
                 std::string_view* which) {
  size_t best = std::string_view::npos;
  for (std::string_view tag : tags) {
    size_t at = s.find(tag);
    if (at < best) {
      best = at;
      *which = tag;
    }
  }
  return best;
}

bool Consume(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

void SkipSpace(std::string_view& s) {
  while (!s.empty() && (s[0] == '\n' || s[0] == ' ' || s[0] == '\r' || s[0] == '\t')) {
    s.remove_prefix(1);
  }
}

// Reads up to `end`, consuming it; nullopt if `end` never comes.
std::optional<std::string_view> ReadUntil(std::string_view& s, std::string_view end) {
  size_t at = s.find(end);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view out = s.substr(0, at);
  s.remove_prefix(at + end.size());
  return out;
}

// Parses one complete block: optional newlines, the opener, invokes, the closer. Whitespace
// between tags is tolerated; anything else is malformed (nullopt).
std::optional<std::vector<ToolCall>> ParseCallsBlock(std::string_view s) {
  SkipSpace(s);
  if (!Consume(s, kCallsOpen)) return std::nullopt;
  std::vector<ToolCall> calls;
  while (true) {
    SkipSpace(s);
    if (Consume(s, kCallsClose)) break;
    if (!Consume(s, kInvokeOpen)) return std::nullopt;
    auto name = ReadUntil(s, "\">");
    if (!name || name->empty() || name->find('"') != std::string_view::npos) return std::nullopt;
    Json args = Json::object();
    while (true) {
      SkipSpace(s);
      if (Consume(s, kInvokeClose)) break;
      if (!Consume(s, kParamOpen)) return std::nullopt;
      auto key = ReadUntil(s, "\" string=\"");
      if (!key || key->find('"') != std::string_view::npos) return std::nullopt;
      bool is_string;
      if (Consume(s, "true\">")) {
        is_string = true;
      } else if (Consume(s, "false\">")) {
        is_string = false;
      } else {
        return std::nullopt;
      }
      auto value = ReadUntil(s, kParamClose);
      if (!value) return std::nullopt;
      std::string k(*key);
      if (args.contains(k)) return std::nullopt;
      if (is_string) {
        args[k] = std::string(*value);
      } else {
        Json parsed = Json::parse(*value, nullptr, /*allow_exceptions=*/false);
        // A non-JSON value the model marked string="false" is kept as text rather than lost.
        args[k] = parsed.is_discarded() ? Json(std::string(*value)) : std::move(parsed);
      }
    }
    calls.push_back({std::string(*name), PythonJsonDumps(args)});
  }
  SkipSpace(s);
  if (!s.empty() || calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace

ReplyStreamParser::ReplyStreamParser(bool thinking, bool tool_calls)
    : mode_(thinking ? Mode::kReasoning : Mode::kContent), tool_calls_(tool_calls) {}

ReplyDelta ReplyStreamParser::Feed(std::string_view chunk) {
  ReplyDelta out;
  if (mode_ == Mode::kDone) return out;
  pending_ += chunk;
  Drain(out, /*final=*/false);
  return out;
}

ReplyDelta ReplyStreamParser::Finish() {
  ReplyDelta out;
  Drain(out, /*final=*/true);
  mode_ = Mode::kDone;
  return out;
}

FinishHint ReplyStreamParser::finish_hint() const {
  if (any_calls_) return FinishHint::kToolCalls;
  return incomplete_ ? FinishHint::kIncomplete : FinishHint::kStop;
}

void ReplyStreamParser::Drain(ReplyDelta& out, bool final) {
  while (mode_ != Mode::kDone) {
    std::string_view which;
    if (mode_ == Mode::kReasoning) {
      size_t at = FindFirst(pending_, {kThinkEnd, kEos}, &which);
      if (at != std::string_view::npos) {
        out.reasoning_delta += pending_.substr(0, at);
        pending_.erase(0, at + which.size());
        mode_ = which == kEos ? Mode::kDone : Mode::kContent;
        continue;
      }
      if (final) {
        out.reasoning_delta += pending_;
        pending_.clear();
        incomplete_ = true;
        mode_ = Mode::kDone;
        return;
      }
      size_t hold = PartialTagSuffix(pending_, {kThinkEnd, kEos});
      size_t emit = pending_.size() - hold;
      emit -= IncompleteUtf8Suffix(std::string_view(pending_).substr(0, emit));
      out.reasoning_delta += pending_.substr(0, emit);
      pending_.erase(0, emit);
      return;
    }
    if (mode_ == Mode::kContent) {
      size_t at = tool_calls_ ? FindFirst(pending_, {kCallsOpen, kEos}, &which) : FindFirst(pending_, {kEos}, &which);
      if (at != std::string_view::npos) {
        if (which == kEos) {
          out.content_delta += pending_.substr(0, at);
          pending_.clear();
          mode_ = Mode::kDone;
          return;
        }
        // The blank line before the block belongs to the block, as in the release.
        size_t start = at;
        while (start > 0 && at - start < 2 && pending_[start - 1] == '\n') --start;
        out.content_delta += pending_.substr(0, start);
        pending_.erase(0, start);
        mode_ = Mode::kBlock;
        continue;
      }
      if (final) {
        out.content_delta += pending_;
        pending_.clear();
        mode_ = Mode::kDone;
        return;
      }
      // Hold a partial tag and the newlines (up to two) right before it: should the tag complete as
      // a calls block, those newlines belong to the block (above), so they cannot go out as content
      // yet. Holding only "\n\n" + a partial tag let a single newline out early, and the streamed
      // content then differed from the one-shot parse (found by fuzz/reply_parser_fuzzer.cc).
      size_t hold = tool_calls_ ? PartialTagSuffix(pending_, {kCallsOpen, kEos}) : PartialTagSuffix(pending_, {kEos});
      for (int nl = 0; tool_calls_ && nl < 2 && hold < pending_.size() && pending_[pending_.size() - hold - 1] == '\n';
           ++nl)
        ++hold;
      size_t emit = pending_.size() - hold;
      emit -= IncompleteUtf8Suffix(std::string_view(pending_).substr(0, emit));
      out.content_delta += pending_.substr(0, emit);
      pending_.erase(0, emit);
      return;
    }
    // kBlock: pending_ starts with the block; hold it whole until it closes.
    size_t at = FindFirst(pending_, {kCallsClose, kEos}, &which);
    if (at != std::string_view::npos && which == kCallsClose) {
      size_t end = at + kCallsClose.size();
      std::string_view block = std::string_view(pending_).substr(0, end);
      if (auto calls = ParseCallsBlock(block)) {
        any_calls_ = true;
        for (ToolCall& c : *calls) out.tool_calls.push_back(std::move(c));
      } else {
        out.content_delta += block;  // malformed: the text stays visible as content
      }
      pending_.erase(0, end);
      mode_ = Mode::kContent;
      continue;
    }
    if (at != std::string_view::npos || final) {  // end of sentence or stream inside the block
      out.content_delta += pending_.substr(0, at == std::string_view::npos ? pending_.size() : at);
      pending_.clear();
      incomplete_ = true;
      mode_ = Mode::kDone;
      return;
    }
    return;
  }
}

ParsedReply ParseReply(std::string_view text, bool thinking) {
  ReplyStreamParser parser(thinking);
  ParsedReply reply;
  for (ReplyDelta d : {parser.Feed(text), parser.Finish()}) {
    reply.reasoning_content += d.reasoning_delta;
    reply.content += d.content_delta;
    for (ToolCall& c : d.tool_calls) reply.tool_calls.push_back(std::move(c));
  }
  reply.finish = parser.finish_hint();
  return reply;
}

}  // namespace ds41::chat
