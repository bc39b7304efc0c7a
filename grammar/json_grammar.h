// A JSON grammar compiled from a JSON Schema (the subset OpenAI's strict structured outputs accept)
// or for any JSON object (response_format json_object). Documents are compact: no whitespace
// between tokens, object properties in the schema's order, numbers of bounded length — so a model
// cannot spend its budget on spaces or digits (strings and arrays may still run on). The matcher
// (json_matcher.h) walks it byte by byte. Immutable once compiled (thread-safe to share).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace ds41::grammar {

enum class NodeKind : uint8_t {
  kLiteral,     // exact bytes: const, enum members, true, false, null
  kString,      // any JSON string
  kNumber,      // a JSON number (at most kMaxDigits digits in each part)
  kInteger,     // a JSON integer (at most kMaxDigits digits)
  kArray,       // [item, ...]
  kObject,      // {"k": v, ...}: the schema's properties in order, optional ones may be left out
  kFreeObject,  // {"<any key>": <any value>, ...}
  kAnyOf,       // one of the alternatives (never a frame: expanded when a value starts)
  kSequence,    // the alternatives, each after the other (the DSML tool-call grammar)
  kRawUntil,    // any bytes, ended by `literal` (included); the terminator has no border
  kTextWithout,  // any bytes that never hold `literal` (no border), ending anywhere
};

inline constexpr int kMaxDigits = 15;         // integer and fraction digits: exact in a double
inline constexpr int kMaxExponentDigits = 2;  // so every number is a finite double (JSON parsers refuse 1e999)
inline constexpr int kMaxNodes = 20000;
inline constexpr int kMaxNesting = 64;      // frames in one matcher stack (json_matcher.h)
inline constexpr int kMaxEnum = 1000;       // members of one enum
inline constexpr int kMaxLiteralBytes = 4096;

struct Property {
  std::string key;  // the bytes after the opening quote: the JSON-escaped name, '"' and ':'
  int32_t value = -1;
  bool required = true;
};

struct Node {
  NodeKind kind = NodeKind::kLiteral;
  std::string literal;                 // kLiteral
  int32_t items = -1;                  // kArray: the item node; kFreeObject: the value node
  int32_t keys = -1;                   // kFreeObject: a kString node for its keys
  std::vector<Property> properties;    // kObject
  std::vector<int32_t> alternatives;   // kAnyOf; kSequence: its parts in order
  // The fewest matcher frames a finite document of this node needs at once (itself and its
  // required properties' chain), computed by the compiler, which refuses a root that has none or
  // needs more than kMaxNesting. The matcher begins a value only where it fits.
  int32_t min_depth = 0;
};

struct Grammar {
  std::vector<Node> nodes;
  int32_t root = -1;
};

// Compiles `schema`; INVALID_ARGUMENT naming the JSON pointer of what lies outside the subset:
// type (one or a list), properties, required, additionalProperties (false or absent: no other
// property is ever generated), items, enum, const, anyOf, $ref to #/$defs or #/definitions
// (recursion included), and the annotations title, description, default, examples, $schema, $id,
// $comment. A $ref cycle that consumes no byte, and a schema no finite document satisfies (an object
// that requires itself), are refused.
// `lenient` (a non-strict tool's parameters): keywords outside the subset are not enforced (read as
// annotations), and additionalProperties is never followed (no other property is generated).
StatusOr<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::ordered_json& schema, bool lenient = false);

// Checks a grammar built by hand (tool_call_grammar.h) as CompileJsonSchema checks its own, and
// computes its heights.
Status FinishGrammar(Grammar* g);

// Any JSON object at the top, any JSON values inside.
std::shared_ptr<const Grammar> JsonObjectGrammar();

// `reply` after free reasoning that ends with "</think>" (thinking mode: the reasoning is the
// model's own; only what follows it is held to the grammar).
StatusOr<std::shared_ptr<const Grammar>> ReasoningFirst(Grammar reply);

// `text` as a JSON string's contents, escaped, without the quotes.
std::string JsonEscape(std::string_view text);

}  // namespace ds41::grammar
