#include "grammar/json_grammar.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

namespace ds41::grammar {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string_view> kAnnotations = {"title", "description", "default", "examples",
                                                  "$schema", "$id", "$comment"};

class Compiler {
 public:
  Compiler(const Json& root, bool lenient) : root_(root), lenient_(lenient) {}

  StatusOr<int32_t> Compile(const Json& s, const std::string& at) {
    // Each level of schema (through $ref too) is a level of this recursion: bounded, whatever the
    // request's JSON depth.
    if (depth_ >= kMaxNesting) return Refuse(at, "the schema nests deeper than " + std::to_string(kMaxNesting) + " levels");
    ++depth_;
    StatusOr<int32_t> n = CompileLevel(s, at);
    --depth_;
    return n;
  }

  StatusOr<int32_t> CompileLevel(const Json& s, const std::string& at) {
    if (g_->nodes.size() >= static_cast<size_t>(kMaxNodes)) return Refuse(at, "the schema is too large");
    if (s.is_boolean()) {
      if (s.get<bool>()) return AnyValue();
      return Refuse(at, "a false schema admits nothing");
    }
    if (!s.is_object()) return Refuse(at, "a schema must be an object");
    for (auto it = s.begin(); it != s.end(); ++it) {
      static const std::set<std::string_view> kKnown = {"type", "properties", "required", "additionalProperties",
                                                        "items", "enum", "const", "anyOf", "$ref", "$defs",
                                                        "definitions"};
      if (!kKnown.count(it.key()) && !kAnnotations.count(it.key()) && !lenient_) {
        return Refuse(at, "keyword \"" + it.key() + "\" is outside the supported subset");
      }
    }
    if (s.contains("$ref")) {
      const size_t defs = s.count("$defs") + s.count("definitions");
      if (s.size() > 1 + defs + CountAnnotations(s) && !lenient_) return Refuse(at, "$ref takes no sibling keywords but $defs");
      return Ref(s["$ref"], at + "/$ref");
    }
    if (s.contains("const")) return Literal(s["const"], at + "/const");
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) return Refuse(at + "/enum", "enum must be a non-empty array");
      if (e.size() > static_cast<size_t>(kMaxEnum)) {
        return Refuse(at + "/enum", "enum may hold at most " + std::to_string(kMaxEnum) + " members");
      }
      std::vector<int32_t> alts;
      for (size_t i = 0; i < e.size(); ++i) {
        DS41_ASSIGN_OR_RETURN(int32_t lit, Literal(e[i], at + "/enum/" + std::to_string(i)));
        alts.push_back(lit);
      }
      return AnyOf(std::move(alts));
    }
    if (s.contains("anyOf")) {
      const Json& a = s["anyOf"];
      if (!a.is_array() || a.empty()) return Refuse(at + "/anyOf", "anyOf must be a non-empty array");
      if (s.contains("type") && !lenient_) return Refuse(at, "anyOf with a sibling type is outside the supported subset");
      std::vector<int32_t> alts;
      for (size_t i = 0; i < a.size(); ++i) {
        DS41_ASSIGN_OR_RETURN(int32_t n, Compile(a[i], at + "/anyOf/" + std::to_string(i)));
        alts.push_back(n);
      }
      return AnyOf(std::move(alts));
    }
    if (!s.contains("type")) {
      if (lenient_) return AnyValue();
      return Refuse(at, "a schema needs a type, enum, const, anyOf or $ref");
    }
    const Json& t = s["type"];
    if (t.is_array()) {
      if (t.empty()) return Refuse(at + "/type", "type must not be empty");
      std::vector<int32_t> alts;
      for (const Json& one : t) {
        if (!one.is_string()) return Refuse(at + "/type", "type entries must be strings");
        DS41_ASSIGN_OR_RETURN(int32_t n, Typed(s, one.get<std::string>(), at));
        alts.push_back(n);
      }
      return AnyOf(std::move(alts));
    }
    if (!t.is_string()) return Refuse(at + "/type", "type must be a string or an array of strings");
    return Typed(s, t.get<std::string>(), at);
  }

  std::shared_ptr<Grammar> TakeGrammar() { return std::move(g_); }

 private:
  static Status Refuse(const std::string& at, const std::string& why) {
    return InvalidArgumentError("schema at " + (at.empty() ? std::string("/") : at) + ": " + why);
  }
  static size_t CountAnnotations(const Json& s) {
    size_t n = 0;
    for (auto it = s.begin(); it != s.end(); ++it) n += kAnnotations.count(it.key());
    return n;
  }

  int32_t Add(Node n) {
    g_->nodes.push_back(std::move(n));
    return static_cast<int32_t>(g_->nodes.size() - 1);
  }
  int32_t AnyOf(std::vector<int32_t> alts) {
    if (alts.size() == 1) return alts[0];
    Node n;
    n.kind = NodeKind::kAnyOf;
    n.alternatives = std::move(alts);
    return Add(std::move(n));
  }
  StatusOr<int32_t> Literal(const Json& value, const std::string& at) {
    Node n;
    n.kind = NodeKind::kLiteral;
    n.literal = value.dump();  // compact, as every document the grammar admits
    if (n.literal.size() > static_cast<size_t>(kMaxLiteralBytes)) return Refuse(at, "the value is too long");
    return Add(std::move(n));
  }
  int32_t Simple(NodeKind kind, std::string literal = "") {
    Node n;
    n.kind = kind;
    n.literal = std::move(literal);
    return Add(std::move(n));
  }

  // Any JSON value: one node set per grammar, shared.
  int32_t AnyValue() {
    if (any_ >= 0) return any_;
    Node alts;
    alts.kind = NodeKind::kAnyOf;
    any_ = Add(alts);
    Node arr;
    arr.kind = NodeKind::kArray;
    arr.items = any_;
    Node obj;
    obj.kind = NodeKind::kFreeObject;
    obj.items = any_;
    obj.keys = Simple(NodeKind::kString);
    const std::vector<int32_t> members = {Add(obj), Add(arr), Simple(NodeKind::kString), Simple(NodeKind::kNumber),
                                          Simple(NodeKind::kLiteral, "true"), Simple(NodeKind::kLiteral, "false"),
                                          Simple(NodeKind::kLiteral, "null")};
    g_->nodes[static_cast<size_t>(any_)].alternatives = members;
    return any_;
  }

  StatusOr<int32_t> Typed(const Json& s, const std::string& type, const std::string& at) {
    if (type == "string") return Simple(NodeKind::kString);
    if (type == "number") return Simple(NodeKind::kNumber);
    if (type == "integer") return Simple(NodeKind::kInteger);
    if (type == "null") return Simple(NodeKind::kLiteral, "null");
    if (type == "boolean") return AnyOf({Simple(NodeKind::kLiteral, "true"), Simple(NodeKind::kLiteral, "false")});
    if (type == "array") {
      Node n;
      n.kind = NodeKind::kArray;
      const int32_t self = Add(n);
      int32_t items = -1;
      if (s.contains("items")) {
        DS41_ASSIGN_OR_RETURN(items, Compile(s["items"], at + "/items"));
      } else {
        items = AnyValue();
      }
      g_->nodes[static_cast<size_t>(self)].items = items;
      return self;
    }
    if (type == "object") return Object(s, at);
    return Refuse(at + "/type", "unknown type \"" + type + "\"");
  }

  StatusOr<int32_t> Object(const Json& s, const std::string& at) {
    if (lenient_ && !s.contains("properties")) return FreeObject();
    if (s.contains("additionalProperties") && s["additionalProperties"] != false && !lenient_) {
      // Without properties, "additionalProperties": true (or absent) is any object.
      if (!s.contains("properties") && s["additionalProperties"] == true) return FreeObject();
      return Refuse(at + "/additionalProperties", "additionalProperties must be false");
    }
    if (!s.contains("properties")) {
      if (s.contains("required")) return Refuse(at + "/required", "required names properties the schema does not define");
      return s.contains("additionalProperties") ? EmptyObject() : FreeObject();
    }
    const Json& props = s["properties"];
    if (!props.is_object()) return Refuse(at + "/properties", "properties must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Refuse(at + "/required", "required must be an array of names");
      for (const Json& r : s["required"]) {
        if (!r.is_string() || !props.contains(r.get<std::string>())) {
          return Refuse(at + "/required", "required names a property the schema does not define: " + r.dump());
        }
        required.insert(r.get<std::string>());
      }
    }
    Node n;
    n.kind = NodeKind::kObject;
    const int32_t self = Add(n);
    std::vector<Property> out;
    for (auto it = props.begin(); it != props.end(); ++it) {
      Property p;
      p.key = JsonEscape(it.key()) + "\":";
      p.required = required.count(it.key()) > 0;
      DS41_ASSIGN_OR_RETURN(p.value, Compile(it.value(), at + "/properties/" + it.key()));
      out.push_back(std::move(p));
    }
    g_->nodes[static_cast<size_t>(self)].properties = std::move(out);
    return self;
  }
  int32_t FreeObject() {
    Node n;
    n.kind = NodeKind::kFreeObject;
    n.items = AnyValue();
    n.keys = Simple(NodeKind::kString);
    return Add(std::move(n));
  }
  int32_t EmptyObject() {
    Node n;
    n.kind = NodeKind::kObject;
    return Add(std::move(n));
  }

  StatusOr<int32_t> Ref(const Json& ref, const std::string& at) {
    if (!ref.is_string()) return Refuse(at, "$ref must be a string");
    const std::string r = ref.get<std::string>();
    std::string name, container;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (r.rfind(prefix, 0) == 0) {
        container = std::string(prefix).substr(2, std::string(prefix).size() - 3);
        name = r.substr(std::string(prefix).size());
      }
    }
    if (r == "#") return RefTo(r, root_, at);
    if (name.empty() || !root_.contains(container) || !root_[container].is_object() ||
        !root_[container].contains(name)) {
      return Refuse(at, "$ref \"" + r + "\" does not name a schema under #/$defs or #/definitions");
    }
    return RefTo(r, root_[container][name], "/" + container + "/" + name);
  }
  // A named schema compiles once: a forwarding anyOf of one alternative is its node, filled after
  // its body compiled, so a recursive reference finds it.
  StatusOr<int32_t> RefTo(const std::string& key, const Json& target, const std::string& at) {
    if (auto it = refs_.find(key); it != refs_.end()) return it->second;
    Node fwd;
    fwd.kind = NodeKind::kAnyOf;
    const int32_t self = Add(fwd);
    refs_[key] = self;
    DS41_ASSIGN_OR_RETURN(int32_t body, Compile(target, at));
    g_->nodes[static_cast<size_t>(self)].alternatives = {body};
    return self;
  }

  const Json& root_;
  const bool lenient_;
  int depth_ = 0;
  std::shared_ptr<Grammar> g_ = std::make_shared<Grammar>();
  std::map<std::string, int32_t> refs_;
  int32_t any_ = -1;
};

// Alternatives expand when a value starts, before any byte: a cycle through anyOf alone would
// expand forever.
Status CheckNoEmptyCycles(const Grammar& g) {
  const std::vector<Node>& nodes = g.nodes;
  std::vector<int> state(nodes.size(), 0);  // 0 unseen, 1 on the path, 2 done
  std::function<bool(int32_t)> cyclic = [&](int32_t v) {
    if (state[static_cast<size_t>(v)] == 1) return true;
    if (state[static_cast<size_t>(v)] == 2) return false;
    state[static_cast<size_t>(v)] = 1;
    if (nodes[static_cast<size_t>(v)].kind == NodeKind::kAnyOf) {
      for (int32_t a : nodes[static_cast<size_t>(v)].alternatives)
        if (cyclic(a)) return true;
    }
    state[static_cast<size_t>(v)] = 2;
    return false;
  };
  for (size_t v = 0; v < nodes.size(); ++v)
    if (cyclic(static_cast<int32_t>(v))) return InvalidArgumentError("schema: a $ref cycle that consumes nothing");
  return Status::Ok();
}

// Fills every node's min_depth; INVALID_ARGUMENT when the root has no finite document or needs
// deeper stacks than the matcher keeps.
Status ComputeHeights(Grammar* g) {
  // A fixpoint from "no finite document known": leaves and empty containers first, then whatever
  // they make finite. Children are often later than parents, so passes repeat until nothing
  // changes: at most once per level of nesting, and the compiler bounds the nesting.
  std::vector<Node>& nodes = g->nodes;
  constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
  for (Node& n : nodes) n.min_depth = kNone;
  auto deeper = [&](int32_t acc, int32_t child) {
    const int32_t v = nodes[static_cast<size_t>(child)].min_depth;
    return acc == kNone || v == kNone ? kNone : std::max(acc, v + 1);
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (Node& n : nodes) {
      int32_t h = 1;  // the node's own frame: literals, strings, numbers, [] and {}, raw text
      switch (n.kind) {
        case NodeKind::kObject:
          for (const Property& p : n.properties)
            if (p.required) h = deeper(h, p.value);
          break;
        case NodeKind::kSequence:
          for (int32_t a : n.alternatives) h = deeper(h, a);
          break;
        case NodeKind::kAnyOf:  // not a frame: its cheapest alternative
          h = kNone;
          for (int32_t a : n.alternatives) h = std::min(h, nodes[static_cast<size_t>(a)].min_depth);
          break;
        default: break;
      }
      if (h < n.min_depth) {
        n.min_depth = h;
        changed = true;
      }
    }
  }
  if (nodes[static_cast<size_t>(g->root)].min_depth == kNone) {
    return InvalidArgumentError("schema: no finite document satisfies it (a required property needs itself)");
  }
  if (nodes[static_cast<size_t>(g->root)].min_depth > kMaxNesting) {
    return InvalidArgumentError("schema: its smallest document nests deeper than " + std::to_string(kMaxNesting) + " levels");
  }
  return Status::Ok();
}

}  // namespace

std::string JsonEscape(std::string_view text) {
  const std::string quoted = nlohmann::json(std::string(text)).dump();
  return quoted.substr(1, quoted.size() - 2);
}

StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(const Json& schema, bool lenient) {
  Compiler c(schema, lenient);
  DS41_ASSIGN_OR_RETURN(int32_t root, c.Compile(schema, ""));
  std::shared_ptr<Grammar> g = c.TakeGrammar();
  g->root = root;
  DS41_RETURN_IF_ERROR(FinishGrammar(g.get()));
  return std::shared_ptr<const Grammar>(std::move(g));
}

Status FinishGrammar(Grammar* g) {
  if (g->root < 0 || g->root >= static_cast<int32_t>(g->nodes.size())) return InvalidArgumentError("grammar: no root");
  DS41_RETURN_IF_ERROR(CheckNoEmptyCycles(*g));
  return ComputeHeights(g);
}

std::shared_ptr<const Grammar> JsonObjectGrammar() {
  static const std::shared_ptr<const Grammar> g = [] {
    auto compiled = CompileJsonSchema(Json{{"type", "object"}});
    return *compiled;
  }();
  return g;
}

StatusOr<std::shared_ptr<const Grammar>> ReasoningFirst(Grammar reply) {
  const int32_t document = reply.root;
  auto g = std::make_shared<Grammar>(std::move(reply));
  Node reasoning;
  reasoning.kind = NodeKind::kRawUntil;
  reasoning.literal = "</think>";
  g->nodes.push_back(std::move(reasoning));
  Node seq;
  seq.kind = NodeKind::kSequence;
  seq.alternatives = {static_cast<int32_t>(g->nodes.size() - 1), document};
  g->nodes.push_back(std::move(seq));
  g->root = static_cast<int32_t>(g->nodes.size() - 1);
  DS41_RETURN_IF_ERROR(FinishGrammar(g.get()));
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace ds41::grammar
