#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace ds41::tokenizer {
namespace {

bool MapsToItself(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};  // Every alphabet codepoint is below U+0144.
};

const Tables& GetTables() {
  static const Tables t = [] {
    Tables r;
    r.to_byte.fill(-1);
    char32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      r.to_cp[b] = MapsToItself(b) ? b : next++;
      r.to_byte[r.to_cp[b]] = static_cast<int16_t>(b);
    }
    return r;
  }();
  return t;
}

}  // namespace

char32_t ByteToCodepoint(uint8_t b) { return GetTables().to_cp[b]; }

std::optional<uint8_t> CodepointToByte(char32_t cp) {
  if (cp >= 512 || GetTables().to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(GetTables().to_byte[cp]);
}

std::string BytesToSymbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) AppendUtf8(ByteToCodepoint(static_cast<uint8_t>(ch)), &out);
  return out;
}

std::optional<std::string> SymbolsToBytes(std::string_view symbols) {
  std::string out;
  out.reserve(symbols.size());
  for (size_t i = 0; i < symbols.size();) {
    const Utf8Unit u = DecodeUtf8At(symbols, i);
    if (!u.valid) return std::nullopt;
    const std::optional<uint8_t> b = CodepointToByte(u.cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
    i += u.len;
  }
  return out;
}

}  // namespace ds41::tokenizer
