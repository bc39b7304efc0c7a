#include "tests/support/test_units.h"

#include "engine/config/presets.h"

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

}  // namespace ds41::testing
