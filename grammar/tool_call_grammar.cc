#include "grammar/tool_call_grammar.h"

#include <set>

namespace ds41::grammar {
namespace {

using Json = nlohmann::ordered_json;

class Builder {
 public:
  Grammar g;

  int32_t Add(Node n) {
    g.nodes.push_back(std::move(n));
    return static_cast<int32_t>(g.nodes.size() - 1);
  }
  int32_t Lit(std::string bytes) {
    Node n;
    n.kind = NodeKind::kLiteral;
    n.literal = std::move(bytes);
    return Add(std::move(n));
  }
  int32_t Raw(std::string_view terminator, NodeKind kind = NodeKind::kRawUntil) {
    Node n;
    n.kind = kind;
    n.literal = std::string(terminator);
    return Add(std::move(n));
  }
  int32_t Seq(std::vector<int32_t> parts) {
    Node n;
    n.kind = NodeKind::kSequence;
    n.alternatives = std::move(parts);
    return Add(std::move(n));
  }
  int32_t AnyOf(std::vector<int32_t> alts) {
    if (alts.size() == 1) return alts[0];
    Node n;
    n.kind = NodeKind::kAnyOf;
    n.alternatives = std::move(alts);
    return Add(std::move(n));
  }
  // Copies `other`'s nodes in, renumbered; returns where its root went.
  int32_t Graft(const Grammar& other) {
    const auto offset = static_cast<int32_t>(g.nodes.size());
    for (Node n : other.nodes) {
      if (n.items >= 0) n.items += offset;
      if (n.keys >= 0) n.keys += offset;
      for (Property& p : n.properties) p.value += offset;
      for (int32_t& a : n.alternatives) a += offset;
      g.nodes.push_back(std::move(n));
    }
    return other.root + offset;
  }

  // A parameter's value after `string="`: raw text where the value may be any string, the raw
  // text of a string constant, and compact JSON for everything else.
  int32_t ParameterValue(int32_t value) {
    std::vector<int32_t> json_alts;
    std::vector<int32_t> variants;
    bool raw = false;
    std::set<int32_t> seen;
    std::vector<int32_t> todo = {value};
    while (!todo.empty()) {
      const int32_t v = todo.back();
      todo.pop_back();
      if (!seen.insert(v).second) continue;
      const Node& n = g.nodes[static_cast<size_t>(v)];
      if (n.kind == NodeKind::kAnyOf) {
        todo.insert(todo.end(), n.alternatives.rbegin(), n.alternatives.rend());
      } else if (n.kind == NodeKind::kString) {
        raw = true;
      } else if (n.kind == NodeKind::kLiteral && !n.literal.empty() && n.literal[0] == '"') {
        const std::string text = Json::parse(n.literal).get<std::string>();
        if (text.find(kParameterEnd) == std::string::npos) variants.push_back(Lit("true\">" + text + std::string(kParameterEnd)));
      } else {
        json_alts.push_back(v);
      }
    }
    if (raw) variants.push_back(Seq({Lit("true\">"), Raw(kParameterEnd)}));
    if (!json_alts.empty()) variants.push_back(Seq({Lit("false\">"), AnyOf(json_alts), Lit(std::string(kParameterEnd))}));
    return AnyOf(variants);
  }
};

Status CheckName(const std::string& what, const std::string& name) {
  if (name.empty() || name.find('"') != std::string::npos || name.find('<') != std::string::npos ||
      name.find('\n') != std::string::npos) {
    return InvalidArgumentError(what + " \"" + name.substr(0, 64) + "\": names must be non-empty, without '\"', '<' or newlines");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<const Grammar>> CompileToolCalls(const std::vector<ToolSpec>& tools, const ToolCallOptions& options) {
  if (tools.empty()) return InvalidArgumentError("tool calls: no tool to call");
  Builder b;
  std::vector<int32_t> invokes;
  for (const ToolSpec& t : tools) {
    DS41_RETURN_IF_ERROR(CheckName("tool", t.name));
    const Json params = t.parameters.is_null() ? Json{{"type", "object"}, {"properties", Json::object()}} : t.parameters;
    auto compiled = CompileJsonSchema(params, /*lenient=*/!t.strict);
    if (!compiled.ok()) return compiled.status().Prefixed("tool " + t.name + " parameters");
    int32_t obj = b.Graft(**compiled);
    while (b.g.nodes[static_cast<size_t>(obj)].kind == NodeKind::kAnyOf &&
           b.g.nodes[static_cast<size_t>(obj)].alternatives.size() == 1) {
      obj = b.g.nodes[static_cast<size_t>(obj)].alternatives[0];  // a $ref's forwarding node
    }
    const NodeKind kind = b.g.nodes[static_cast<size_t>(obj)].kind;
    if (kind != NodeKind::kObject && kind != NodeKind::kFreeObject) {
      return InvalidArgumentError("tool " + t.name + " parameters: the schema must be an object's");
    }
    std::vector<int32_t> parts = {b.Lit("<｜DSML｜ invoke name=\"" + t.name + "\">")};
    const std::vector<Property> properties = b.g.nodes[static_cast<size_t>(obj)].properties;
    for (const Property& p : properties) {
      const std::string key = Json::parse("\"" + p.key.substr(0, p.key.size() - 2) + "\"").get<std::string>();
      DS41_RETURN_IF_ERROR(CheckName("tool " + t.name + " parameter", key));
      int32_t param = b.Seq({b.Lit("\n<｜DSML｜ parameter name=\"" + key + "\" string=\""), b.ParameterValue(p.value)});
      if (!p.required) param = b.AnyOf({param, b.Seq({})});
      parts.push_back(param);
    }
    parts.push_back(b.Lit("\n</｜DSML｜ invoke>"));
    invokes.push_back(b.Seq(std::move(parts)));
  }
  const int32_t invoke = b.AnyOf(std::move(invokes));
  int32_t body = invoke;
  if (options.parallel) {
    // more := "" | "\n" invoke more
    Node more;
    more.kind = NodeKind::kAnyOf;
    const int32_t more_id = b.Add(more);
    const int32_t again = b.Seq({b.Lit("\n"), invoke, more_id});
    b.g.nodes[static_cast<size_t>(more_id)].alternatives = {b.Seq({}), again};
    body = b.Seq({invoke, more_id});
  }
  // The reply parser opens a block at its tag wherever it stands (the blank line before it is
  // optional there), so free text must never hold the tag itself.
  constexpr std::string_view kOpen = "<｜DSML｜ calls>";
  const int32_t rest = b.Seq({b.Lit("\n"), body, b.Lit("\n</｜DSML｜ calls>")});
  int32_t root = options.optional ? b.AnyOf({b.Raw(kOpen, NodeKind::kTextWithout), b.Seq({b.Raw(kOpen), rest})})
                                  : b.Seq({b.Lit("\n\n" + std::string(kOpen)), rest});
  b.g.root = root;
  if (options.thinking) return ReasoningFirst(std::move(b.g));
  auto g = std::make_shared<Grammar>(std::move(b.g));
  DS41_RETURN_IF_ERROR(FinishGrammar(g.get()));
  return std::shared_ptr<const Grammar>(std::move(g));
}

std::string ToolCallSpecText(const std::vector<ToolSpec>& tools, const ToolCallOptions& options) {
  Json spec = {{"tools", Json::array()}, {"parallel", options.parallel}, {"thinking", options.thinking},
               {"optional", options.optional}};
  for (const ToolSpec& t : tools) {
    spec["tools"].push_back({{"name", t.name}, {"parameters", t.parameters}, {"strict", t.strict}});
  }
  return spec.dump();
}

StatusOr<std::shared_ptr<const Grammar>> CompileToolCallSpec(std::string_view text) {
  const Json spec = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_object() || !spec.contains("tools") || !spec["tools"].is_array()) {
    return InvalidArgumentError("tool calls: the spec must be {\"tools\": [...], ...}");
  }
  // The text comes over the wire: read every field by its type, never by a throwing conversion.
  auto flag = [](const Json& j, const char* key, bool otherwise) {
    return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : otherwise;
  };
  std::vector<ToolSpec> tools;
  for (const Json& t : spec["tools"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      return InvalidArgumentError("tool calls: every tool needs a name");
    }
    tools.push_back({t["name"].get<std::string>(), t.contains("parameters") ? t["parameters"] : Json(), flag(t, "strict", false)});
  }
  ToolCallOptions o;
  o.parallel = flag(spec, "parallel", true);
  o.thinking = flag(spec, "thinking", false);
  o.optional = flag(spec, "optional", false);
  return CompileToolCalls(tools, o);
}

}  // namespace ds41::grammar
