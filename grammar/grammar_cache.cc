#include "grammar/grammar_cache.h"

#include "grammar/tool_call_grammar.h"
#include "util/mutex.h"
#include "util/sha256.h"

namespace ds41::grammar {

StatusOr<std::shared_ptr<const Grammar>> GrammarCache::Get(std::string_view schema_text, bool reasoning_first) {
  if (schema_text.empty() && !reasoning_first) return JsonObjectGrammar();
  return GetOrCompile(reasoning_first ? "reasoning+schema" : "schema", schema_text,
                      [reasoning_first](std::string_view text) -> StatusOr<std::shared_ptr<const Grammar>> {
                        std::shared_ptr<const Grammar> document = JsonObjectGrammar();
                        if (!text.empty()) {
                          const auto json = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
                          if (json.is_discarded()) return InvalidArgumentError("the response schema is not JSON");
                          DS41_ASSIGN_OR_RETURN(document, CompileJsonSchema(json));
                        }
                        if (reasoning_first) return ReasoningFirst(*document);
                        return document;
                      });
}

StatusOr<std::shared_ptr<const Grammar>> GrammarCache::GetToolCalls(std::string_view spec_text) {
  return GetOrCompile("tools", spec_text, CompileToolCallSpec);
}

StatusOr<std::shared_ptr<const Grammar>> GrammarCache::GetOrCompile(
    std::string_view kind, std::string_view text,
    const std::function<StatusOr<std::shared_ptr<const Grammar>>(std::string_view)>& compile) {
  Sha256 h;
  h.Update(kind);
  h.Update(std::string_view("\0", 1));
  h.Update(text);
  const std::string digest = h.HexDigest();
  {
    MutexLock l(&mu_);
    if (auto it = by_digest_.find(digest); it != by_digest_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  // Compiled outside the lock: a large schema does not stall the other sequences' lookups.
  DS41_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> g, compile(text));
  MutexLock l(&mu_);
  if (auto it = by_digest_.find(digest); it != by_digest_.end()) return it->second->second;  // raced: keep one
  lru_.emplace_front(digest, g);
  by_digest_[digest] = lru_.begin();
  if (lru_.size() > capacity_) {
    by_digest_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return g;
}

int64_t GrammarCache::hits() const {
  MutexLock l(&mu_);
  return hits_;
}

int64_t GrammarCache::misses() const {
  MutexLock l(&mu_);
  return misses_;
}

}  // namespace ds41::grammar
