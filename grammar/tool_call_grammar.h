// The release's DSML tool-call block (chat/chat_render.cc renders it, chat/reply_parser.h parses it)
// as a grammar: what tool_choice "required" or a named function enforces. Each call names one of
// the tools and gives its parameters in the schema's order, required ones always: a parameter whose
// value may be a string is written raw (string="true"), any other value as compact JSON of its
// schema (string="false"). Strict tools' schemas compile strictly (json_grammar.h); the others'
// leniently (validation keywords outside the subset are not enforced). With thinking, free
// reasoning up to "</think>" comes first. Optional (tool_choice "auto" with strict tools): the reply
// is text, and may end with one block, which then holds to the same rules.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/json_grammar.h"

namespace ds41::grammar {

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema of an object (null: no parameters)
  bool strict = false;
};

struct ToolCallOptions {
  bool parallel = true;   // false: exactly one call
  bool thinking = false;  // reasoning up to "</think>" before the block
  bool optional = false;  // tool_choice "auto": text, and the block after it or none (no other block)
};

// INVALID_ARGUMENT naming the tool (and where in its parameters) when one cannot be compiled.
StatusOr<std::shared_ptr<const Grammar>> CompileToolCalls(const std::vector<ToolSpec>& tools, const ToolCallOptions& options);

// The same as JSON text, as the router sends it to a decoder, and compiled from it.
std::string ToolCallSpecText(const std::vector<ToolSpec>& tools, const ToolCallOptions& options);
StatusOr<std::shared_ptr<const Grammar>> CompileToolCallSpec(std::string_view text);

inline constexpr std::string_view kParameterEnd = "</｜DSML｜ parameter>";

}  // namespace ds41::grammar
