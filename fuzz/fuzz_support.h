// What the harnesses share: the libFuzzer entry points, a failing check that aborts (so libFuzzer
// and the standalone driver both report the input), and a reader that turns input bytes into
// choices. Header-only; no project library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);

// A property the harness checks on the code under test. A failure is a finding: the message goes
// to stderr and the process aborts, which both drivers report with the input that caused it.
#define DS41_FUZZ_CHECK(cond)                                                                  \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond);   \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

namespace ds41::fuzz {

// Consumes an input from the front: small choices and sized pieces. Past the end every read gives
// zeros or empty strings, so a short input is still a valid (if dull) sequence of choices.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  uint8_t Byte() { return p_ < end_ ? *p_++ : 0; }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(Byte()) << (8 * i);
    return v;
  }
  bool Bool() { return Byte() & 1; }
  // A value in [0, n); REQUIRES n > 0.
  size_t Below(size_t n) { return Byte() % n; }
  // Up to `max` bytes, the length given by the next byte.
  std::string String(size_t max) {
    const size_t n = std::min<size_t>(Byte(), max);
    return Take(n);
  }
  std::string Take(size_t n) {
    n = std::min(n, left());
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  std::string Rest() { return Take(left()); }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
inline bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n;
  }
  return true;
}

// Where the harnesses find their fixtures (fuzz/data), set by fuzz/CMakeLists.txt.
inline std::string DataPath(std::string_view file) {
#ifdef DS41_FUZZ_DATA
  return std::string(DS41_FUZZ_DATA) + "/" + std::string(file);
#else
  return std::string(file);
#endif
}

}  // namespace ds41::fuzz
