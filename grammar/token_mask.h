// Which tokens of a byte-level vocabulary a JSON matcher accepts next: the mask constrained
// decoding applies to a sequence's logits before sampling. Built once per vocabulary: a byte trie
// of the tokens, which a walk from the matcher's state prunes at every refused prefix. Inside a
// string, a number or raw text (JsonMatcher::GroupsByTop) the bytes act alike whatever surrounds it, so
// for each such place a table says which tokens stay inside the value (allowed wholesale) and
// which end it, kept as a trie of what follows the value's end and walked from the state the end
// leaves. Free text, where most of the vocabulary is admissible, then costs a copy of a bitmask and
// a walk of short suffixes. Strings' and numbers' tables are built with the masker; raw text's on
// first use (a walk of the whole trie, under a lock) and kept.
// Thread-safe after construction; Fill runs concurrently for different matchers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_matcher.h"
#include "util/mutex.h"
#include "util/thread_annotations.h"

namespace ds41::grammar {

// One bit per token id, 64 ids per word.
using TokenBitmask = std::vector<uint64_t>;

inline bool MaskHas(const TokenBitmask& m, int32_t id) { return (m[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1; }

class TokenMasker {
 public:
  // `token_bytes[id]`: what the tokenizer decodes id to; `grammar_free[id]`: a token the grammar
  // never admits (control tokens: a document is text); `vocab_size` >= token_bytes.size() (ids past
  // the tokenizer's are never admitted); `eos`: the id admitted once a document is complete.
  TokenMasker(const std::vector<std::string>& token_bytes, const std::vector<bool>& grammar_free, int32_t vocab_size,
              int32_t eos);

  int32_t vocab_size() const { return vocab_; }
  int32_t eos() const { return eos_; }
  // Sets `mask` ([vocab bits]) to the tokens `m` accepts next, EOS when it is complete.
  void Fill(const JsonMatcher& m, TokenBitmask* mask) const;
  // Advances `m` by a token's bytes; false when it refuses them (EOS is accepted when complete).
  bool Advance(JsonMatcher* m, int32_t token) const;

 private:
  struct Trie {
    // Node i's children are edges [first[i], first[i + 1]) of (byte, child); its tokens end there.
    std::vector<uint32_t> first;
    std::vector<uint8_t> edge_byte;
    std::vector<uint32_t> edge_child;
    std::vector<std::vector<int32_t>> ends;
    int depth = 0;  // the longest token's bytes
    void Build(const std::vector<std::pair<std::string, int32_t>>& tokens);
  };
  // What tokens do from one place inside a string, a number or raw text (a group's top).
  struct TopTable {
    TokenBitmask within;               // their bytes stay inside the value
    Trie ending;                       // the value ends inside them: keyed by the bytes after its end
    bool ends_before_any_byte = false;  // a number that may end here: any token may follow it
  };
  // Walks `trie` depth first from `m`'s state: `accepted(node, state)` for each node whose bytes
  // the matcher takes (false: not below it), `refused(node, parent_state, depth)` for each edge it
  // refuses at that depth.
  template <typename OnAccepted, typename OnRefused>
  static void Traverse(const Trie& trie, const JsonMatcher& m, const OnAccepted& accepted, const OnRefused& refused);
  // Sets the bit of every token of `trie` whose bytes `m` accepts (those ending at the root are the
  // caller's).
  void Walk(const Trie& trie, const JsonMatcher& m, TokenBitmask* mask) const;
  static std::string TableKey(const JsonMatcher& m, const Frame& top);
  const TopTable& TableFor(const JsonMatcher& m, const Frame& top) const;
  std::unique_ptr<TopTable> BuildTable(const JsonMatcher& m, const Frame& top) const;

  int32_t vocab_ = 0, eos_ = -1;
  std::vector<std::string> bytes_;  // per id ("" for ids the grammar never admits)
  Trie all_;                        // every admissible token
  mutable Mutex tables_mu_;
  mutable std::map<std::string, std::unique_ptr<TopTable>> tables_ DS41_GUARDED_BY(tables_mu_);
};

}  // namespace ds41::grammar
