#include "unit/unit_format.h"

#include <cstring>

#include "util/crc32c.h"

namespace ds41 {
namespace {

constexpr char kMagic[8] = {'D', 'S', '4', '1', 'U', 'N', 'I', 'T'};
constexpr uint32_t kFlagTail = 1;
constexpr size_t kFixedHeader = 8 + 2 + 2 + 4 + 32 + 8 + 4 + 4;  // up to and including the source count
constexpr size_t kSourceHeader = 6 * 4;

class Out {
 public:
  template <typename T>
  void Put(T v) {
    s_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void Bytes(const void* p, size_t n) { s_.append(static_cast<const char*>(p), n); }
  std::string& str() { return s_; }

 private:
  std::string s_;
};

class In {
 public:
  explicit In(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}
  template <typename T>
  bool Get(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool Bytes(void* dst, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    // An empty vector's data() may be null, and memcpy with a null pointer is undefined even for
    // no bytes (UBSan in the fuzzing build stopped on the first full unit, which carries no floats).
    if (n == 0) return true;
    std::memcpy(dst, p_, n);
    p_ += n;
    return true;
  }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

 private:
  const char* p_;
  const char* end_;
};

}  // namespace

StatusOr<Fingerprint> ParseFingerprint(std::string_view hex) {
  if (hex.size() != 64) return InvalidArgumentError("model fingerprint must be 64 hex characters");
  Fingerprint f{};
  for (size_t i = 0; i < 32; ++i) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = nib(hex[2 * i]), lo = nib(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgumentError("model fingerprint is not hex");
    f[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return f;
}

StatusOr<UnitLayout> UnitLayout::FromConfig(const ModelConfig& c, int unit_tokens) {
  if (unit_tokens <= 0 || unit_tokens % 2 != 0 || unit_tokens > (1 << 16))
    return InvalidArgumentError("unit size must be a positive even number of tokens (got " +
                                std::to_string(unit_tokens) + ")");
  UnitLayout l;
  l.unit_tokens = unit_tokens;
  for (int L : c.kv_source_layers) {
    Source s;
    s.layer = L;
    s.ratio = c.compress_ratios[L];
    s.main_bytes = c.main_kv_bytes();
    s.index_bytes = c.index_key_bytes();
    s.head_dim = c.head_dim;
    if (unit_tokens % s.ratio != 0)
      return InvalidArgumentError("unit size " + std::to_string(unit_tokens) + " is not a multiple of layer " +
                                  std::to_string(L) + "'s compress ratio " + std::to_string(s.ratio));
    l.sources.push_back(s);
  }
  return l;
}

size_t UnitLayout::PayloadBytes(int tokens) const {
  size_t n = 0;
  for (const Source& s : sources)
    n += static_cast<size_t>(tokens / s.ratio) * (s.main_bytes + s.index_bytes) +
         2 * static_cast<size_t>(tokens % s.ratio) * s.head_dim * sizeof(float);
  return n;
}

std::string EncodeUnit(const UnitLayout& l, const Unit& u) {
  Out o;
  o.Bytes(kMagic, sizeof(kMagic));
  o.Put<uint16_t>(kUnitFormatVersion);
  o.Put<uint16_t>(static_cast<uint16_t>(kFixedHeader + kSourceHeader * l.sources.size()));
  o.Put<uint32_t>(u.is_tail(l) ? kFlagTail : 0);
  o.Bytes(u.model.data(), u.model.size());
  o.Put<int64_t>(u.first_position);
  o.Put<int32_t>(u.tokens);
  o.Put<uint32_t>(static_cast<uint32_t>(l.sources.size()));
  for (size_t i = 0; i < l.sources.size(); ++i) {
    const auto& s = l.sources[i];
    o.Put<uint32_t>(static_cast<uint32_t>(s.layer));
    o.Put<uint32_t>(static_cast<uint32_t>(s.ratio));
    o.Put<uint32_t>(static_cast<uint32_t>(u.tokens / s.ratio));
    o.Put<uint32_t>(static_cast<uint32_t>(s.main_bytes));
    o.Put<uint32_t>(static_cast<uint32_t>(s.index_bytes));
    o.Put<uint32_t>(static_cast<uint32_t>((u.tokens % s.ratio) * s.head_dim));
  }
  for (const UnitSource& s : u.sources) {
    o.Bytes(s.main_kv.data(), s.main_kv.size());
    o.Bytes(s.index_keys.data(), s.index_keys.size());
    o.Bytes(s.carry_kv.data(), s.carry_kv.size() * sizeof(float));
    o.Bytes(s.carry_gate.data(), s.carry_gate.size() * sizeof(float));
  }
  const uint32_t crc = Crc32c(o.str().data(), o.str().size());
  o.Put<uint32_t>(crc);
  return std::move(o.str());
}

StatusOr<UnitHeader> VerifyUnitBytes(std::string_view b) {
  if (b.size() < kFixedHeader + 4 || std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0)
    return InvalidArgumentError("not a cache unit (bad magic or too short)");
  if (b.size() > kMaxUnitBytes) return InvalidArgumentError("unit of " + std::to_string(b.size()) + " bytes exceeds the limit");
  uint32_t stored;
  std::memcpy(&stored, b.data() + b.size() - 4, 4);
  if (Crc32c(b.data(), b.size() - 4) != stored) return DataLossError("unit checksum mismatch");
  In in(b.substr(sizeof(kMagic)));
  uint16_t version = 0, header = 0;
  uint32_t flags = 0, nsrc = 0;
  UnitHeader h;
  in.Get(&version);
  in.Get(&header);
  if (version != kUnitFormatVersion) return InvalidArgumentError("unit format version " + std::to_string(version) + " is not supported");
  in.Get(&flags);
  in.Bytes(h.model.data(), h.model.size());
  in.Get(&h.first_position);
  in.Get(&h.tokens);
  in.Get(&nsrc);
  if (h.tokens <= 0 || h.first_position < 0 || nsrc > 64 || header != kFixedHeader + kSourceHeader * nsrc)
    return DataLossError("unit header is inconsistent");
  // No writer sets another flag: a unit that does was not made by this format version.
  if ((flags & ~kFlagTail) != 0) return DataLossError("unit header has unknown flags");
  h.tail = flags & kFlagTail;
  return h;
}

StatusOr<Unit> DecodeUnit(const UnitLayout& l, std::string_view b) {
  DS41_ASSIGN_OR_RETURN(UnitHeader h, VerifyUnitBytes(b));
  Unit u;
  u.model = h.model;
  u.first_position = h.first_position;
  u.tokens = h.tokens;
  if (u.tokens > l.unit_tokens) return InvalidArgumentError("unit holds more tokens than the unit size");
  if (u.first_position % l.unit_tokens != 0) return InvalidArgumentError("unit does not start at a unit boundary");
  // The store files a unit as a tail (after a parent) by its flag, the engine by its token count:
  // the two must agree, or the same bytes would mean different things to each.
  if (h.tail != u.is_tail(l)) return DataLossError("unit's tail flag disagrees with its token count");
  In in(b.substr(kFixedHeader - 4));
  uint32_t nsrc = 0;
  in.Get(&nsrc);
  if (nsrc != l.sources.size()) return InvalidArgumentError("unit has " + std::to_string(nsrc) + " KV sources, the model " +
                                                            std::to_string(l.sources.size()));
  for (const auto& s : l.sources) {
    uint32_t f[6];
    for (auto& v : f) in.Get(&v);
    if (f[0] != static_cast<uint32_t>(s.layer) || f[1] != static_cast<uint32_t>(s.ratio) ||
        f[2] != static_cast<uint32_t>(u.tokens / s.ratio) || f[3] != static_cast<uint32_t>(s.main_bytes) ||
        f[4] != static_cast<uint32_t>(s.index_bytes) || f[5] != static_cast<uint32_t>((u.tokens % s.ratio) * s.head_dim))
      return InvalidArgumentError("unit layout of layer " + std::to_string(s.layer) + " differs from the model's");
  }
  if (in.left() != l.PayloadBytes(u.tokens) + 4) return DataLossError("unit payload size mismatch");
  for (const auto& s : l.sources) {
    UnitSource us;
    const size_t e = static_cast<size_t>(u.tokens / s.ratio);
    const size_t carry = static_cast<size_t>(u.tokens % s.ratio) * s.head_dim;
    us.main_kv.resize(e * s.main_bytes);
    us.index_keys.resize(e * s.index_bytes);
    us.carry_kv.resize(carry);
    us.carry_gate.resize(carry);
    in.Bytes(us.main_kv.data(), us.main_kv.size());
    in.Bytes(us.index_keys.data(), us.index_keys.size());
    in.Bytes(us.carry_kv.data(), carry * sizeof(float));
    in.Bytes(us.carry_gate.data(), carry * sizeof(float));
    u.sources.push_back(std::move(us));
  }
  return u;
}

}  // namespace ds41
