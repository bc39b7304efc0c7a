// Compiled grammars by schema text, so a schema a client sends with every request (an agent's
// tool, a response format) compiles once: a bounded LRU keyed by the text's SHA-256. Thread-safe.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "grammar/json_grammar.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41::grammar {

class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 256) : capacity_(capacity) {}

  // The grammar of `schema_text` (a JSON Schema as JSON text; "" for any JSON object), compiled on
  // a miss, after free reasoning when `reasoning_first` (json_grammar.h ReasoningFirst);
  // INVALID_ARGUMENT when the text is not JSON or the schema is refused (not cached).
  StatusOr<std::shared_ptr<const Grammar>> Get(std::string_view schema_text, bool reasoning_first = false);
  // The same for a tool-call spec (tool_call_grammar.h ToolCallSpecText).
  StatusOr<std::shared_ptr<const Grammar>> GetToolCalls(std::string_view spec_text);

  int64_t hits() const;
  int64_t misses() const;

 private:
  StatusOr<std::shared_ptr<const Grammar>> GetOrCompile(
      std::string_view kind, std::string_view text,
      const std::function<StatusOr<std::shared_ptr<const Grammar>>(std::string_view)>& compile);

  const size_t capacity_;
  mutable Mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const Grammar>>> lru_ DS41_GUARDED_BY(mu_);  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> by_digest_ DS41_GUARDED_BY(mu_);
  int64_t hits_ DS41_GUARDED_BY(mu_) = 0, misses_ DS41_GUARDED_BY(mu_) = 0;
};

}  // namespace ds41::grammar
