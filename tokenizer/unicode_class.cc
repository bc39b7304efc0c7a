#include "tokenizer/unicode_class.h"

#include <algorithm>
#include <array>
#include <span>

namespace ds41::tokenizer {
namespace {

struct CodepointRange {
  char32_t first;
  char32_t last;
};

#include "tokenizer/unicode_tables.inc"

bool InRanges(std::span<const CodepointRange> ranges, char32_t cp) {
  // First range whose last >= cp; cp is in it iff first <= cp.
  auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                             [](const CodepointRange& r, char32_t c) { return r.last < c; });
  return it != ranges.end() && it->first <= cp;
}

uint8_t ClassifySlow(char32_t cp) {
  uint8_t mask = 0;
  if (InRanges(kLetterRanges, cp)) mask |= kClassLetter;
  if (InRanges(kMarkRanges, cp)) mask |= kClassMark;
  if (InRanges(kNumberRanges, cp)) mask |= kClassNumber;
  if (InRanges(kPunctRanges, cp)) mask |= kClassPunct;
  if (InRanges(kSymbolRanges, cp)) mask |= kClassSymbol;
  if (InRanges(kSpaceRanges, cp)) mask |= kClassSpace;
  return mask;
}

// ASCII is by far the common case, so it is answered from a table built once.
std::array<uint8_t, 128> BuildAsciiTable() {
  std::array<uint8_t, 128> t{};
  for (char32_t c = 0; c < 128; ++c) t[c] = ClassifySlow(c);
  return t;
}

}  // namespace

uint8_t ClassifyCodepoint(char32_t cp) {
  static const std::array<uint8_t, 128> kAscii = BuildAsciiTable();
  if (cp < 128) return kAscii[cp];
  if (cp > 0x10FFFF) return 0;
  return ClassifySlow(cp);
}

}  // namespace ds41::tokenizer
