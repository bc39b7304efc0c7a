#include "tests/cache/test_units.h"

#include "engine/config/presets.h"
#include "unit/unit_format.h"
#include "unit/unit_key.h"

namespace ds41::testing {
const UnitLayout& TestLayout() {
  static const UnitLayout l = *UnitLayout::FromConfig(TinyConfig(), 64);
  return l;
}

std::string TestUnitBytes(const std::string& fingerprint, int64_t first, int tokens, uint32_t seed) {
  Unit u;
  u.model = *ParseFingerprint(fingerprint);
  u.first_position = first;
  u.tokens = tokens;
  for (const auto& s : TestLayout().sources) {
    UnitSource us;
    us.main_kv.resize(static_cast<size_t>(tokens / s.ratio) * s.main_bytes);
    for (size_t i = 0; i < us.main_kv.size(); ++i) us.main_kv[i] = static_cast<uint8_t>(seed * 31 + i);
    us.index_keys.assign(static_cast<size_t>(tokens / s.ratio) * s.index_bytes, static_cast<uint8_t>(seed));
    us.carry_kv.assign(static_cast<size_t>(tokens % s.ratio) * s.head_dim, 0.25f);
    us.carry_gate = us.carry_kv;
    u.sources.push_back(us);
  }
  return EncodeUnit(TestLayout(), u);
}

std::vector<int32_t> TestTokens(int n, int seed) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 13 + seed * 101) % 500;
  return t;
}

std::vector<UnitPut> TestPromptUnits(const CacheNamespace& ns, const std::vector<int32_t>& t, int seed) {
  std::vector<UnitPut> out;
  UnitKey prev = ns.id;
  size_t i = 0;
  for (; i + 64 <= t.size(); i += 64) {
    prev = ChainKey(prev, t.data() + i, 64);
    out.push_back({prev, std::nullopt,
                   TestUnitBytes(ns.model_fingerprint, static_cast<int64_t>(i), 64, static_cast<uint32_t>(seed) + static_cast<uint32_t>(i))});
  }
  if (i < t.size()) {
    const int rest = static_cast<int>(t.size() - i);
    out.push_back({TailKey(prev, t.data() + i, rest), prev,
                   TestUnitBytes(ns.model_fingerprint, static_cast<int64_t>(i), rest, static_cast<uint32_t>(seed) + 999)});
  }
  return out;
}

}  // namespace ds41::testing
