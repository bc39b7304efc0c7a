#include "unit/unit_key.h"

#include <algorithm>

#include "util/sha256.h"

namespace ds41 {
namespace {

UnitKey Finish(Sha256* h) {
  auto d = h->Digest();
  UnitKey k;
  std::copy(d.begin(), d.end(), k.begin());
  return k;
}

// The tokens as little-endian bytes, a buffer at a time (one hash update per 256 tokens, not per token).
void PutTokens(Sha256* h, const int32_t* t, size_t n) {
  uint8_t b[1024];
  for (size_t i = 0; i < n;) {
    const size_t m = std::min(n - i, sizeof(b) / 4);
    for (size_t j = 0; j < m; ++j) {
      const uint32_t v = static_cast<uint32_t>(t[i + j]);
      b[4 * j] = static_cast<uint8_t>(v);
      b[4 * j + 1] = static_cast<uint8_t>(v >> 8);
      b[4 * j + 2] = static_cast<uint8_t>(v >> 16);
      b[4 * j + 3] = static_cast<uint8_t>(v >> 24);
    }
    h->Update(b, 4 * m);
    i += m;
  }
}

UnitKey Chained(const char* domain, size_t dlen, const UnitKey& prev, const int32_t* t, size_t n) {
  Sha256 h;
  h.Update(domain, dlen);
  h.Update(prev.data(), prev.size());
  PutTokens(&h, t, n);
  return Finish(&h);
}

}  // namespace

UnitKey NamespaceRoot(const Fingerprint& model, uint16_t version, const std::string& salt) {
  Sha256 h;
  static const char kDomain[] = "ds41-unit-namespace";
  h.Update(kDomain, sizeof(kDomain));  // includes the terminating 0
  h.Update(model.data(), model.size());
  const uint8_t v[2] = {static_cast<uint8_t>(version), static_cast<uint8_t>(version >> 8)};
  h.Update(v, 2);
  h.Update(salt);
  return Finish(&h);
}

UnitKey ChainKey(const UnitKey& prev, const int32_t* t, size_t n) {
  static const char kDomain[] = "ds41-unit";
  return Chained(kDomain, sizeof(kDomain), prev, t, n);
}

UnitKey TailKey(const UnitKey& prev, const int32_t* t, size_t n) {
  static const char kDomain[] = "ds41-tail";
  return Chained(kDomain, sizeof(kDomain), prev, t, n);
}

UnitKey ReplyKey(const UnitKey& root, const std::array<uint8_t, 32>& digest) {
  Sha256 h;
  static const char kDomain[] = "ds41-reply";
  h.Update(kDomain, sizeof(kDomain));
  h.Update(root.data(), root.size());
  h.Update(digest.data(), digest.size());
  return Finish(&h);
}

int32_t ImageKeyToken(const std::array<uint8_t, 32>& image_hash, int64_t offset) {
  uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x |= static_cast<uint64_t>(image_hash[i]) << (8 * i);
  x += 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(offset + 1);  // splitmix64 of (hash, offset)
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return -1 - static_cast<int32_t>(x & 0x3fffffff);  // in [-2^30, -1]: never a vocabulary id
}

std::vector<UnitKey> ChainKeys(const UnitKey& root, const std::vector<int32_t>& tokens, int U) {
  std::vector<UnitKey> keys;
  UnitKey prev = root;
  for (size_t i = 0; i + U <= tokens.size(); i += U) {
    prev = ChainKey(prev, tokens.data() + i, U);
    keys.push_back(prev);
  }
  return keys;
}

UnitKey PrefixKey(const UnitKey& root, const std::vector<int32_t>& tokens, int64_t pos, int U) {
  UnitKey prev = root;
  int64_t i = 0;
  for (; i + U <= pos; i += U) prev = ChainKey(prev, tokens.data() + i, U);
  return i == pos ? prev : TailKey(prev, tokens.data() + i, static_cast<size_t>(pos - i));
}

std::string KeyHex(const UnitKey& k) { return ToHex(k.data(), k.size()); }

}  // namespace ds41
