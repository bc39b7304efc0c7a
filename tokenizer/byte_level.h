// GPT-2 byte-level alphabet: each byte 0..255 is shown as one printable codepoint so that BPE
// vocabulary entries are valid UTF-8 strings. Printable Latin-1 bytes map to themselves; the other
// 68 bytes map, in byte order, to U+0100 onward.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ds41::tokenizer {

char32_t ByteToCodepoint(uint8_t b);

// The byte a codepoint stands for, or nullopt when it is not in the alphabet.
std::optional<uint8_t> CodepointToByte(char32_t cp);

// Maps raw bytes to their byte-level string (UTF-8).
std::string BytesToSymbols(std::string_view bytes);

// Maps a byte-level string back to raw bytes; nullopt if it holds a character outside the
// alphabet or is not well-formed UTF-8.
std::optional<std::string> SymbolsToBytes(std::string_view symbols);

}  // namespace ds41::tokenizer
