#include "grammar/json_matcher.h"

#include <algorithm>
#include <optional>

namespace ds41::grammar {
namespace {

// Phases of each frame kind (Frame::phase).
enum : uint8_t {
  // kString
  kStrOpen = 0, kStrText = 1, kStrEscape = 2, kStrHex = 3, kStrLowSlash = 4, kStrLowU = 5,
  // kNumber, kInteger
  kNumStart = 0, kNumMinus = 1, kNumZero = 2, kNumInt = 3, kNumDot = 4, kNumFrac = 5, kNumE = 6, kNumExpSign = 7,
  kNumExp = 8,
  // kArray
  kArrOpen = 0, kArrFirst = 1, kArrAfterItem = 2, kArrAfterComma = 3,
  // kObject (schema properties) and kFreeObject
  kObjOpen = 0, kObjFirst = 1, kObjKey = 2, kObjAfterValue = 3, kObjAfterComma = 4, kObjValue = 5, kObjColon = 6,
};

// A string's next UTF-8 continuation byte (Frame::b in kStrText while Frame::a > 0): 80..BF unless
// the lead narrowed it.
enum : uint8_t { kUtf8Any = 0, kUtf8From_A0 = 1, kUtf8To_9F = 2, kUtf8From_90 = 3, kUtf8To_8F = 4 };

bool Digit(uint8_t c) { return c >= '0' && c <= '9'; }
int HexValue(uint8_t c) {
  if (Digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
// A \u escape's frame: Frame::a hex digits left, Frame::b the code unit so far, kLowHalf set in b
// when it must be the low half of a surrogate pair (strict JSON parsers refuse a lone surrogate).
constexpr int32_t kLowHalf = 1 << 16;

// A frame as the bytes after it see it: inside a \\u escape the code unit read so far matters only
// for whether it may still become a surrogate's high or low half, so it is replaced by the smallest
// prefix of the same kind (the masker's tables are keyed by this, a handful of places, not 65,536).
Frame Canonical(const Frame& f, NodeKind kind) {
  if (kind != NodeKind::kString || f.phase != kStrHex) return f;
  const int read = 4 - f.a;
  const int32_t unit = f.b & 0xFFFF, lo = unit << (4 * f.a), hi = lo | ((1 << (4 * f.a)) - 1);
  const bool may_high = hi >= 0xD800 && lo <= 0xDBFF, may_low = hi >= 0xDC00 && lo <= 0xDFFF;
  int32_t prefix = 0;
  if (may_high && may_low) prefix = read == 0 ? 0 : 0xD;
  else if (may_high) prefix = read == 2 ? 0xD8 : 0xD80;
  else if (may_low) prefix = read == 2 ? 0xDC : 0xDC0;
  Frame c = f;
  c.b = (f.b & kLowHalf) | prefix;
  return c;
}

// Properties from `from` on are all optional: the object may close.
bool RestOptional(const Node& n, int32_t from) {
  for (size_t i = static_cast<size_t>(from); i < n.properties.size(); ++i)
    if (n.properties[i].required) return false;
  return true;
}

}  // namespace

JsonMatcher::JsonMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  std::vector<Frame> starts;
  Expand(grammar_->root, &starts);
  for (const Frame& f : starts) stacks_.push_back({f});
}

void JsonMatcher::Expand(int32_t node, std::vector<Frame>* out, int depth) const {
  const Node& n = grammar_->nodes[static_cast<size_t>(node)];
  if (n.kind != NodeKind::kAnyOf) {
    out->push_back(Frame{node, 0, 0, 0});
    return;
  }
  if (depth > kMaxNesting) return;  // the compiler refuses cycles; this bounds chains of aliases
  for (int32_t alt : n.alternatives) Expand(alt, out, depth + 1);
}

bool JsonMatcher::Fits(size_t depth, int32_t node) const {
  return depth + static_cast<size_t>(grammar_->nodes[static_cast<size_t>(node)].min_depth) <=
         static_cast<size_t>(kMaxNesting);
}

bool JsonMatcher::NextValueFits(const Stack& s) const {
  const Frame& top = s.back();
  const Node& n = grammar_->nodes[static_cast<size_t>(top.node)];
  switch (n.kind) {
    case NodeKind::kArray: return top.phase != kArrAfterItem || Fits(s.size(), n.items);
    case NodeKind::kFreeObject: return top.phase != kObjAfterValue || Fits(s.size(), n.keys);
    case NodeKind::kObject:
      if (top.phase != kObjAfterValue) return true;
      for (size_t j = static_cast<size_t>(top.a); j < n.properties.size(); ++j) {
        if (Fits(s.size(), n.properties[j].value)) return true;
        if (n.properties[j].required) return false;
      }
      return false;
    default: return true;
  }
}

bool JsonMatcher::CanEndHere(const Frame& f) const {
  const Node& n = grammar_->nodes[static_cast<size_t>(f.node)];
  const NodeKind k = n.kind;
  if (k == NodeKind::kSequence) return static_cast<size_t>(f.a) == n.alternatives.size();
  if (k == NodeKind::kTextWithout) return true;
  if (k != NodeKind::kNumber && k != NodeKind::kInteger) return false;
  return f.phase == kNumZero || f.phase == kNumInt || f.phase == kNumFrac || f.phase == kNumExp;
}

int32_t JsonMatcher::TakePendingValue(Frame* f) const {
  const Node& n = grammar_->nodes[static_cast<size_t>(f->node)];
  if (n.kind == NodeKind::kSequence && static_cast<size_t>(f->a) < n.alternatives.size()) {
    return n.alternatives[static_cast<size_t>(f->a++)];
  }
  if (n.kind == NodeKind::kArray && f->phase == kArrAfterComma) {
    f->phase = kArrAfterItem;  // where the item leaves it
    return n.items;
  }
  if (n.kind == NodeKind::kObject && f->phase == kObjValue) {
    f->phase = kObjAfterValue;
    f->a = f->b + 1;
    return n.properties[static_cast<size_t>(f->b)].value;
  }
  if (n.kind == NodeKind::kFreeObject && f->phase == kObjValue) {
    f->phase = kObjAfterValue;
    return n.items;
  }
  if (n.kind == NodeKind::kFreeObject && f->phase == kObjAfterComma) {
    f->phase = kObjColon;  // where the key leaves it
    return n.keys;
  }
  return -1;
}

JsonMatcher::Result JsonMatcher::Consume(Frame* f, uint8_t c, int32_t* child) const {
  if (const int32_t pending = TakePendingValue(f); pending >= 0) {
    *child = pending;
    return Result::kPush;
  }
  const Node& n = grammar_->nodes[static_cast<size_t>(f->node)];
  switch (n.kind) {
    case NodeKind::kLiteral:
      if (static_cast<size_t>(f->a) >= n.literal.size() || static_cast<uint8_t>(n.literal[f->a]) != c) return Result::kReject;
      return ++f->a == static_cast<int32_t>(n.literal.size()) ? Result::kDone : Result::kStay;
    case NodeKind::kString:
      switch (f->phase) {
        case kStrOpen:
          if (c != '"') return Result::kReject;
          f->phase = kStrText;
          return Result::kStay;
        case kStrText:
          // JSON text is UTF-8: a character's continuation bytes in the range its lead allows
          // (a: bytes still to come, b: the range of the next one), so no overlong form, surrogate
          // or code point past U+10FFFF is ever written.
          if (f->a > 0) {
            const uint8_t lo = f->b == kUtf8From_A0 ? 0xA0 : f->b == kUtf8From_90 ? 0x90 : 0x80;
            const uint8_t hi = f->b == kUtf8To_9F ? 0x9F : f->b == kUtf8To_8F ? 0x8F : 0xBF;
            if (c < lo || c > hi) return Result::kReject;
            --f->a;
            f->b = kUtf8Any;
            return Result::kStay;
          }
          if (c == '"') return Result::kDone;
          if (c == '\\') f->phase = kStrEscape;
          if (c < 0x80) return c < 0x20 ? Result::kReject : Result::kStay;
          f->b = kUtf8Any;
          if (c >= 0xC2 && c <= 0xDF) f->a = 1;
          else if (c == 0xE0) f->a = 2, f->b = kUtf8From_A0;           // no overlong 3-byte forms
          else if (c == 0xED) f->a = 2, f->b = kUtf8To_9F;             // no surrogates
          else if (c >= 0xE1 && c <= 0xEF) f->a = 2;
          else if (c == 0xF0) f->a = 3, f->b = kUtf8From_90;           // no overlong 4-byte forms
          else if (c >= 0xF1 && c <= 0xF3) f->a = 3;
          else if (c == 0xF4) f->a = 3, f->b = kUtf8To_8F;             // nothing past U+10FFFF
          else return Result::kReject;                                 // a continuation byte, C0, C1, F5..FF
          return Result::kStay;
        case kStrEscape:
          if (c == 'u') {
            f->phase = kStrHex;
            f->a = 4;
            f->b = 0;
            return Result::kStay;
          }
          if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't') {
            return Result::kReject;
          }
          f->phase = kStrText;
          return Result::kStay;
        case kStrLowSlash:
          if (c != '\\') return Result::kReject;
          f->phase = kStrLowU;
          return Result::kStay;
        case kStrLowU:
          if (c != 'u') return Result::kReject;
          f->phase = kStrHex;
          f->a = 4;
          f->b = kLowHalf;
          return Result::kStay;
        default: {  // kStrHex
          const int h = HexValue(c);
          if (h < 0) return Result::kReject;
          f->b = (f->b & kLowHalf) | ((f->b & 0xFFFF) << 4 | h);
          if (--f->a > 0) return Result::kStay;
          const int32_t unit = f->b & 0xFFFF;
          const bool low = unit >= 0xDC00 && unit <= 0xDFFF, high = unit >= 0xD800 && unit <= 0xDBFF;
          if ((f->b & kLowHalf) ? !low : low) return Result::kReject;
          f->phase = high && !(f->b & kLowHalf) ? kStrLowSlash : kStrText;
          f->b = 0;
          return Result::kStay;
        }
      }
    case NodeKind::kNumber:
    case NodeKind::kInteger: {
      const bool real = n.kind == NodeKind::kNumber;
      auto digit_in = [&](uint8_t next, int limit) {
        f->phase = next;
        if (++f->a > limit) return Result::kReject;
        return Result::kStay;
      };
      switch (f->phase) {
        case kNumStart:
          if (c == '-') {
            f->phase = kNumMinus;
            return Result::kStay;
          }
          [[fallthrough]];
        case kNumMinus:
          if (c == '0') {
            f->phase = kNumZero;
            return Result::kStay;
          }
          if (!Digit(c)) return Result::kReject;
          f->a = 0;
          return digit_in(kNumInt, kMaxDigits);
        case kNumZero:
        case kNumInt:
          if (f->phase == kNumInt && Digit(c)) return digit_in(kNumInt, kMaxDigits);
          if (real && c == '.') {
            f->phase = kNumDot;
            f->a = 0;
            return Result::kStay;
          }
          if (real && (c == 'e' || c == 'E')) {
            f->phase = kNumE;
            f->a = 0;
            return Result::kStay;
          }
          return Result::kReject;
        case kNumDot:
        case kNumFrac:
          if (Digit(c)) return digit_in(kNumFrac, kMaxDigits);
          if (f->phase == kNumFrac && (c == 'e' || c == 'E')) {
            f->phase = kNumE;
            f->a = 0;
            return Result::kStay;
          }
          return Result::kReject;
        case kNumE:
          if (c == '+' || c == '-') {
            f->phase = kNumExpSign;
            return Result::kStay;
          }
          [[fallthrough]];
        default:  // kNumExpSign, kNumExp
          if (!Digit(c)) return Result::kReject;
          return digit_in(kNumExp, kMaxExponentDigits);
      }
    }
    case NodeKind::kArray:
      switch (f->phase) {
        case kArrOpen:
          if (c != '[') return Result::kReject;
          f->phase = kArrFirst;
          return Result::kStay;
        case kArrAfterItem:
          if (c == ']') return Result::kDone;
          if (c != ',') return Result::kReject;
          f->phase = kArrAfterComma;
          return Result::kStay;
        default:  // kArrFirst: the end, or the first item
          if (c == ']') return Result::kDone;
          f->phase = kArrAfterItem;
          *child = n.items;
          return Result::kPush;
      }
    case NodeKind::kObject:
      switch (f->phase) {
        case kObjOpen:
          if (c != '{') return Result::kReject;
          f->phase = kObjFirst;
          return Result::kStay;
        case kObjFirst:  // '"' is a choice of key: Step handles it
          return c == '}' && RestOptional(n, f->a) ? Result::kDone : Result::kReject;
        case kObjKey: {
          const std::string& key = n.properties[static_cast<size_t>(f->b)].key;
          if (static_cast<uint8_t>(key[static_cast<size_t>(f->a)]) != c) return Result::kReject;
          if (++f->a == static_cast<int32_t>(key.size())) f->phase = kObjValue;
          return Result::kStay;
        }
        case kObjAfterValue:
          if (c == '}') return RestOptional(n, f->a) ? Result::kDone : Result::kReject;
          if (c != ',' || static_cast<size_t>(f->a) >= n.properties.size()) return Result::kReject;
          f->phase = kObjAfterComma;
          return Result::kStay;
        default:  // kObjAfterComma: '"' is a choice of key (Step)
          return Result::kReject;
      }
    case NodeKind::kFreeObject:
      switch (f->phase) {
        case kObjOpen:
          if (c != '{') return Result::kReject;
          f->phase = kObjFirst;
          return Result::kStay;
        case kObjFirst:  // the end, or the first key
          if (c == '}') return Result::kDone;
          f->phase = kObjColon;
          *child = n.keys;
          return Result::kPush;
        case kObjColon:
          if (c != ':') return Result::kReject;
          f->phase = kObjValue;
          return Result::kStay;
        default:  // kObjAfterValue
          if (c == '}') return Result::kDone;
          if (c != ',') return Result::kReject;
          f->phase = kObjAfterComma;
          return Result::kStay;
      }
    case NodeKind::kRawUntil: {
      const std::string& end = n.literal;
      if (static_cast<uint8_t>(end[static_cast<size_t>(f->a)]) == c) {
        return ++f->a == static_cast<int32_t>(end.size()) ? Result::kDone : Result::kStay;
      }
      f->a = static_cast<uint8_t>(end[0]) == c ? 1 : 0;  // the terminator has no border: no other restart
      return Result::kStay;
    }
    case NodeKind::kTextWithout: {
      const std::string& banned = n.literal;
      if (static_cast<uint8_t>(banned[static_cast<size_t>(f->a)]) == c) {
        return ++f->a == static_cast<int32_t>(banned.size()) ? Result::kReject : Result::kStay;
      }
      f->a = static_cast<uint8_t>(banned[0]) == c ? 1 : 0;
      return Result::kStay;
    }
    case NodeKind::kSequence:  // every part taken (pending parts are pushed above): it ends before the byte
    case NodeKind::kAnyOf:     // never a frame
      break;
  }
  return Result::kReject;
}

void JsonMatcher::Step(Stack stack, uint8_t c, std::vector<Stack>* out) const {
  if (stack.empty()) return;  // the document is complete
  const Frame top = stack.back();
  const Node& n = grammar_->nodes[static_cast<size_t>(top.node)];
  // A number that may end here also ends before this byte, which its parent then reads.
  if (CanEndHere(top)) {
    Stack parent(stack.begin(), stack.end() - 1);
    Step(std::move(parent), c, out);
  }
  if (n.kind == NodeKind::kObject && (top.phase == kObjFirst || top.phase == kObjAfterComma) && c == '"') {
    // Any property from the next one on, skipping only optional ones, may come now.
    for (size_t j = static_cast<size_t>(top.a); j < n.properties.size(); ++j) {
      if (!Fits(stack.size(), n.properties[j].value)) continue;  // an optional one too deep here (required ones fit)
      Stack s = stack;
      s.back() = Frame{top.node, kObjKey, 0, static_cast<int32_t>(j)};
      out->push_back(std::move(s));
      if (n.properties[j].required) break;
    }
    return;
  }
  // A separator commits to another value: only where one still fits under kMaxNesting, so the
  // matcher never reaches a state no byte continues.
  if (c == ',' && !NextValueFits(stack)) return;
  int32_t child = -1;
  switch (Consume(&stack.back(), c, &child)) {
    case Result::kReject: return;
    case Result::kStay: out->push_back(std::move(stack)); return;
    case Result::kDone:
      stack.pop_back();  // the parent's phase was set when this frame was pushed
      out->push_back(std::move(stack));
      return;
    case Result::kPush: {
      std::vector<Frame> starts;
      Expand(child, &starts);
      for (const Frame& f : starts) {
        if (!Fits(stack.size(), f.node)) continue;
        Stack s = stack;
        s.push_back(f);
        Step(std::move(s), c, out);  // the child's first byte
      }
      return;
    }
  }
}

bool JsonMatcher::Accept(uint8_t c) {
  std::vector<Stack> next;
  for (const Stack& s : stacks_) Step(s, c, &next);
  if (next.empty()) return false;
  stacks_ = std::move(next);
  Normalize();
  return true;
}

bool JsonMatcher::AcceptBytes(std::string_view bytes) {
  const std::vector<Stack> before = stacks_;
  for (char c : bytes) {
    if (!Accept(static_cast<uint8_t>(c))) {
      stacks_ = before;
      return false;
    }
  }
  return true;
}

bool JsonMatcher::IsComplete() const {
  for (const Stack& s : stacks_) {
    // Every level may end without another byte (numbers, finished sequences).
    if (std::all_of(s.begin(), s.end(), [this](const Frame& f) { return CanEndHere(f); })) return true;
  }
  return false;
}

bool JsonMatcher::InsideFreeString() const {
  for (const Stack& s : stacks_) {
    if (s.empty()) return false;
    const Frame& top = s.back();
    // Between characters only: inside one, the next byte is a continuation byte, not text.
    if (grammar_->nodes[static_cast<size_t>(top.node)].kind != NodeKind::kString || top.phase != kStrText || top.a > 0) {
      return false;
    }
  }
  return !stacks_.empty();
}

JsonMatcher JsonMatcher::Expanded() const {
  JsonMatcher out(grammar_, {});
  std::vector<Frame> starts;
  for (Stack s : stacks_) {
    const int32_t child = s.empty() ? -1 : TakePendingValue(&s.back());
    if (child < 0) {
      out.stacks_.push_back(std::move(s));
      continue;
    }
    starts.clear();
    Expand(child, &starts);
    for (const Frame& f : starts) {
      if (!Fits(s.size(), f.node)) continue;
      out.stacks_.push_back(s);
      out.stacks_.back().push_back(f);
    }
  }
  out.Normalize();
  return out;
}

std::vector<std::pair<std::optional<Frame>, JsonMatcher>> JsonMatcher::GroupsByTop() const {
  std::vector<std::pair<std::optional<Frame>, JsonMatcher>> groups;
  JsonMatcher rest(grammar_, {});
  for (const Stack& s : stacks_) {
    const NodeKind k = s.empty() ? NodeKind::kAnyOf : grammar_->nodes[static_cast<size_t>(s.back().node)].kind;
    if (k != NodeKind::kString && k != NodeKind::kNumber && k != NodeKind::kInteger && k != NodeKind::kRawUntil &&
        k != NodeKind::kTextWithout) {
      rest.stacks_.push_back(s);
      continue;
    }
    const Frame top = Canonical(s.back(), k);
    auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return SameTopState(*g.first, top); });
    if (same == groups.end()) {
      groups.emplace_back(top, JsonMatcher(grammar_, {}));
      same = groups.end() - 1;
    }
    same->second.stacks_.push_back(s);
  }
  if (!rest.stacks_.empty()) groups.emplace_back(std::nullopt, std::move(rest));
  return groups;
}

bool JsonMatcher::SameTopState(const Frame& x, const Frame& y) const {
  const Node& nx = grammar_->nodes[static_cast<size_t>(x.node)];
  const Node& ny = grammar_->nodes[static_cast<size_t>(y.node)];
  return nx.kind == ny.kind && nx.literal == ny.literal && x.phase == y.phase && x.a == y.a && x.b == y.b;
}

JsonMatcher JsonMatcher::PopTops() const {
  JsonMatcher out = *this;
  for (Stack& s : out.stacks_) s.pop_back();  // the parent's phase was set when the top was pushed
  out.Normalize();
  return out;
}

JsonMatcher JsonMatcher::Probe(std::shared_ptr<const Grammar> grammar, const Frame& top) {
  return JsonMatcher(std::move(grammar), {Stack{top}});
}

JsonMatcher::JsonMatcher(std::shared_ptr<const Grammar> grammar, std::vector<Stack> stacks)
    : grammar_(std::move(grammar)), stacks_(std::move(stacks)) {}

void JsonMatcher::Normalize() {
  std::sort(stacks_.begin(), stacks_.end());
  stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
  if (stacks_.size() > static_cast<size_t>(kMaxStacks)) {
    dropped_ += static_cast<int64_t>(stacks_.size()) - kMaxStacks;
    stacks_.resize(kMaxStacks);
  }
}

}  // namespace ds41::grammar
