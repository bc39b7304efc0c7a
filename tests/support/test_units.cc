#include "tests/support/test_units.h"

#include "engine/config/presets.h"
#include "unit/unit_format.h"

namespace ds41 {

std::string MakeTinyUnitBytes(int tokens, uint8_t fill) {
  auto l = *UnitLayout::FromConfig(TinyConfig(), 64);
  Unit u;
  u.model.fill(1);
  u.tokens = tokens;
  for (const auto& s : l.sources) {
    UnitSource us;
    us.main_kv.assign(static_cast<size_t>(tokens / s.ratio) * s.main_bytes, fill);
    us.index_keys.assign(static_cast<size_t>(tokens / s.ratio) * s.index_bytes, fill);
    us.carry_kv.assign(static_cast<size_t>(tokens % s.ratio) * s.head_dim, 0.0f);
    us.carry_gate = us.carry_kv;
    u.sources.push_back(us);
  }
  return EncodeUnit(l, u);
}

}  // namespace ds41
