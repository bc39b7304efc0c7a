// A byte-level pushdown matcher over a compiled JSON grammar (json_grammar.h): it accepts the
// prefixes of the documents the grammar admits that nest at most kMaxNesting frames (a value begins
// only where a finished one fits, so every accepted prefix can still be completed). Where the grammar leaves a choice open (anyOf,
// an optional property, a number that may go on or end) it follows every choice at once, as a set
// of stacks; a byte keeps the stacks that accept it. Thread-compatible: one per sequence; copies
// are independent (the token masker explores from copies).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "grammar/json_grammar.h"

namespace ds41::grammar {

inline constexpr int kMaxStacks = 4096;  // stacks followed at once; more are dropped (and counted)

// One level of a document being matched: a grammar node and where inside it the bytes are.
struct Frame {
  int32_t node = 0;
  uint8_t phase = 0;
  int32_t a = 0;  // literal: bytes matched; object: the next property; number: digits in this part;
                  // string: hex digits left in a \u escape, or a UTF-8 character's bytes still to come
  int32_t b = 0;  // object: the property whose key is being matched; string: a \u escape's code unit, or
                  // the range of a UTF-8 character's next byte
  bool operator==(const Frame&) const = default;
  auto operator<=>(const Frame&) const = default;
};

using Stack = std::vector<Frame>;

class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const Grammar> grammar);

  // Consumes one byte; false (and no change) when no document continues with it.
  bool Accept(uint8_t byte);
  // Consumes the bytes in order; false (and no change) when any is refused.
  bool AcceptBytes(std::string_view bytes);
  // A whole document has been matched (the stream may end here).
  bool IsComplete() const;
  // Every stack is inside a string's text (no escape pending): a byte other than '"', '\\' and the
  // control characters keeps it there, whatever the document around it.
  bool InsideFreeString() const;

  // The same state with every value that must come next already begun (its frame pushed, no byte
  // read): the same documents, and tops that say what is being read.
  JsonMatcher Expanded() const;
  // The stacks apart by their top: those whose top is a string, a number or raw text at the same
  // place (kind, terminator, phase, progress; a \u escape's code unit only as far as surrogates
  // care), whose next bytes act alike whatever surrounds it until it ends, grouped with that place
  // as a frame; the others together, with nullopt. A byte string is accepted iff some group does.
  std::vector<std::pair<std::optional<Frame>, JsonMatcher>> GroupsByTop() const;
  // The state once every stack's top value has ended (its frame popped). REQUIRES: no stack empty.
  JsonMatcher PopTops() const;
  // A matcher reading only the value `top` is in (ended: IsComplete), for the token masker's tables.
  static JsonMatcher Probe(std::shared_ptr<const Grammar> grammar, const Frame& top);
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }

  // No byte can follow (complete, and nothing may extend the document).
  bool IsDone() const { return stacks_.size() == 1 && stacks_[0].empty(); }
  const std::vector<Stack>& stacks() const { return stacks_; }
  const Grammar& grammar() const { return *grammar_; }
  int64_t dropped_stacks() const { return dropped_; }

 private:
  JsonMatcher(std::shared_ptr<const Grammar> grammar, std::vector<Stack> stacks);
  enum class Result { kReject, kStay, kDone, kPush };
  // A frame whose next value is due whatever the byte (no end or other choice possible): moves it
  // to where the value leaves it and returns the value's node; else -1.
  int32_t TakePendingValue(Frame* f) const;
  bool SameTopState(const Frame& x, const Frame& y) const;
  // A value of `node` begun on a stack of `depth` frames can be finished within kMaxNesting.
  bool Fits(size_t depth, int32_t node) const;
  // After a ',' on `s`, some value can still begin there.
  bool NextValueFits(const Stack& s) const;
  void Normalize();  // sorted, without repeats, at most kMaxStacks
  // Appends to `out` what `stack` becomes after `byte`.
  void Step(Stack stack, uint8_t byte, std::vector<Stack>* out) const;
  // `node` begins a value: one frame per alternative it may be (anyOf expanded).
  void Expand(int32_t node, std::vector<Frame>* out, int depth = 0) const;
  // The top frame consumes `byte`: kPush asks for a child value starting with it (`child`).
  Result Consume(Frame* f, uint8_t byte, int32_t* child) const;
  bool CanEndHere(const Frame& f) const;  // a number may end before the next byte
  void ChildDone(Stack* stack) const;     // the top frame ended: pop it, move its parent on

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;
  int64_t dropped_ = 0;
};

}  // namespace ds41::grammar
