#include "tokenizer/pretokenizer.h"

#include <cstddef>
#include <cstdint>

#include "tokenizer/unicode_class.h"
#include "tokenizer/utf8.h"

namespace ds41::tokenizer {
namespace {

// The text as characters: codepoint, class mask and byte offset of each (offset[n] = size).
struct Chars {
  std::vector<char32_t> cp;
  std::vector<uint8_t> cls;
  std::vector<size_t> offset;
};

Chars Scan(std::string_view text) {
  Chars c;
  c.cp.reserve(text.size());
  c.cls.reserve(text.size());
  c.offset.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    const Utf8Unit u = DecodeUtf8At(text, i);
    c.cp.push_back(u.cp);
    c.cls.push_back(ClassifyCodepoint(u.cp));
    c.offset.push_back(i);
    i += u.len;
  }
  c.offset.push_back(text.size());
  return c;
}

struct Span {
  size_t begin;
  size_t end;
};

// A matcher returns the end of the match starting at `i` within [i, end), or i for no match.
// None of the three patterns can match the empty string, so i unambiguously means "no match".
using Matcher = size_t (*)(const Chars& c, size_t i, size_t end);

size_t MatchNumbers(const Chars& c, size_t i, size_t end) {
  size_t j = i;
  while (j < end && j - i < 3 && (c.cls[j] & kClassNumber)) ++j;
  return j;
}

bool IsCjkKana(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x309F) ||
         (cp >= 0x30A0 && cp <= 0x30FF);
}

size_t MatchCjk(const Chars& c, size_t i, size_t end) {
  size_t j = i;
  while (j < end && IsCjkKana(c.cp[j])) ++j;
  return j;
}

bool IsAsciiPunct(char32_t cp) {
  return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
         (cp >= 0x7B && cp <= 0x7E);
}
bool IsAsciiLetter(char32_t cp) { return (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z'); }
bool IsCrLf(char32_t cp) { return cp == '\r' || cp == '\n'; }

size_t MatchWords(const Chars& c, size_t i, size_t end) {
  const auto is = [&](size_t k, uint8_t mask) { return k < end && (c.cls[k] & mask) != 0; };
  const auto run = [&](size_t k, uint8_t mask) {
    while (is(k, mask)) ++k;
    return k;
  };
  // 1. [ASCII punctuation][A-Za-z]+
  if (IsAsciiPunct(c.cp[i]) && i + 1 < end && IsAsciiLetter(c.cp[i + 1])) {
    size_t j = i + 1;
    while (j < end && IsAsciiLetter(c.cp[j])) ++j;
    return j;
  }
  // 2. [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ : the optional prefix is tried first, then dropped.
  constexpr uint8_t kLM = kClassLetter | kClassMark;
  if (!IsCrLf(c.cp[i]) && !(c.cls[i] & (kClassLetter | kClassPunct | kClassSymbol)) && is(i + 1, kLM)) {
    return run(i + 1, kLM);
  }
  if (is(i, kLM)) return run(i, kLM);
  // 3. ' '?[\p{P}\p{S}]+[\r\n]*
  constexpr uint8_t kPS = kClassPunct | kClassSymbol;
  size_t p = (c.cp[i] == ' ' && is(i + 1, kPS)) ? i + 1 : i;
  if (is(p, kPS)) {
    size_t j = run(p, kPS);
    while (j < end && IsCrLf(c.cp[j])) ++j;
    return j;
  }
  if (!(c.cls[i] & kClassSpace)) return i;  // All remaining alternatives start with \s.
  const size_t ws_end = run(i, kClassSpace);
  // 4. \s*[\r\n]+ : \s* backs off to the last CR/LF of the run, and [\r\n]+ takes just that one
  // (the character after it is either a non-CR/LF space or the end of the run).
  for (size_t k = ws_end; k > i; --k) {
    if (IsCrLf(c.cp[k - 1])) return k;
  }
  // 5. \s+(?!\S) : at the end of the piece the whole run; otherwise give back one character,
  // which is whitespace and so satisfies the lookahead, if the run has two or more.
  if (ws_end == end) return ws_end;
  if (ws_end - i >= 2) return ws_end - 1;
  // 6. \s+
  return ws_end;
}

// Applies one isolating split to every span in `in`.
std::vector<Span> Split(const Chars& c, const std::vector<Span>& in, Matcher match) {
  std::vector<Span> out;
  out.reserve(in.size() * 2);
  for (const Span& s : in) {
    size_t gap = s.begin;
    size_t i = s.begin;
    while (i < s.end) {
      const size_t m = match(c, i, s.end);
      if (m == i) {
        ++i;
        continue;
      }
      if (gap < i) out.push_back({gap, i});
      out.push_back({i, m});
      i = gap = m;
    }
    if (gap < s.end) out.push_back({gap, s.end});
  }
  return out;
}

}  // namespace

std::vector<std::string_view> PreTokenize(std::string_view text) {
  if (text.empty()) return {};
  const Chars c = Scan(text);
  std::vector<Span> spans{{0, c.cp.size()}};
  spans = Split(c, spans, MatchNumbers);
  spans = Split(c, spans, MatchCjk);
  spans = Split(c, spans, MatchWords);
  std::vector<std::string_view> pieces;
  pieces.reserve(spans.size());
  for (const Span& s : spans) {
    pieces.push_back(text.substr(c.offset[s.begin], c.offset[s.end] - c.offset[s.begin]));
  }
  return pieces;
}

}  // namespace ds41::tokenizer
