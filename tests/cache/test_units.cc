#include "tests/cache/test_units.h"

#include "unit/unit_key.h"

namespace ds41::testing {

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
