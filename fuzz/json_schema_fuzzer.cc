// Surface: a client's response_format json_schema (and strict tool parameters), compiled by the
// grammar engine (grammar/json_grammar.h), and the model's bytes read by its matcher: neither the
// schema nor the model's output is trusted.
//
// Input: a schema as JSON text (or, when it starts with "T", a tool-call spec as the router sends
// decoders: grammar/tool_call_grammar.h), then a NUL byte, then bytes for the matcher.
// Properties: no crash and bounded work whatever the schema (deeper than 64 levels is not parsed:
// the router's request parser refuses it first); a compiled schema's sampled documents are
// accepted and complete; bytes the matcher takes as a complete document parse as JSON (when they
// are valid UTF-8, as JSON text must be); a refused byte leaves the matcher as it was.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_support.h"
#include "grammar/json_matcher.h"
#include "grammar/json_sample.h"
#include "grammar/tool_call_grammar.h"

namespace {

bool Shallow(std::string_view text, int limit) {
  int depth = 0;
  for (char c : text) {
    if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view schema_text = all.substr(0, nul);
  const std::string_view doc = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);
  if (!Shallow(schema_text, 64)) return 0;
  const bool tools = !schema_text.empty() && schema_text[0] == 'T';
  ds41::StatusOr<std::shared_ptr<const ds41::grammar::Grammar>> grammar = ds41::InvalidArgumentError("");
  if (tools) {
    grammar = ds41::grammar::CompileToolCallSpec(schema_text.substr(1));
  } else {
    const auto schema = nlohmann::ordered_json::parse(schema_text, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return 0;
    grammar = ds41::grammar::CompileJsonSchema(schema);
  }
  if (!grammar.ok()) return 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    const std::string sample = ds41::grammar::SampleDocument(**grammar, seed);
    ds41::grammar::JsonMatcher m(*grammar);
    DS41_FUZZ_CHECK(m.AcceptBytes(sample));
    DS41_FUZZ_CHECK(m.IsComplete());
  }
  // The bytes the matcher takes, as a masked model would write them: refused ones are skipped.
  ds41::grammar::JsonMatcher m(*grammar);
  std::string kept;
  for (char c : doc) {
    const auto before = m.stacks();
    if (!m.Accept(static_cast<uint8_t>(c))) {
      DS41_FUZZ_CHECK(m.stacks() == before);
      continue;
    }
    kept += c;
  }
  if (!tools && m.IsComplete() && ds41::fuzz::ValidUtf8(kept)) {
    DS41_FUZZ_CHECK(!nlohmann::json::parse(kept, nullptr, /*allow_exceptions=*/false).is_discarded());
  }
  return 0;
}
